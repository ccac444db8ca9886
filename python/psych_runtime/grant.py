"""A tenant's CodeExecutionPolicy and the grant it narrows (C++ code_execution_grant)."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from ._fields import Struct
from .budget import BindingBudget
from .limits import SandboxLimits


@dataclass(frozen=True)
class CodeExecutionGrant(Struct):
    """What a tenant's policy allows: the backend's offer (its ceiling and whether it can grant
    network) and the profile's BindingBudget, which the policy may only narrow."""

    limits: SandboxLimits = dataclasses.field(default_factory=SandboxLimits)
    allow_network: bool = False
    budget: BindingBudget = dataclasses.field(default_factory=BindingBudget)


CodeExecutionPolicy = Callable[[str, CodeExecutionGrant], CodeExecutionGrant]
"""`policy(tenant, grant) -> grant`: receives the grant so far and returns one no wider. One that
returns a wider grant is a deployment error, and run_code reports it as one."""
