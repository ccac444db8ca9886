"""A tenant's CodeExecutionPolicy and the grant it narrows (C++ code_execution_grant)."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

from ._fields import Struct
from .budget import BindingBudget
from .limits import SandboxLimits


@dataclass(frozen=True)
class CodeExecutionGrant(Struct):
    """What a tenant's policy allows: the backend's offer (its ceiling and whether it can grant
    network) and the profile's BindingBudget, which the policy may only narrow.

    `allowed_hosts`: the hosts a network=ALLOWLIST execution may reach when allow_network is False.
    None (what the policy receives) leaves them to the profile and the Spec; a tuple of host
    patterns narrows to those, and an empty tuple allows none."""

    limits: SandboxLimits = dataclasses.field(default_factory=SandboxLimits)
    allow_network: bool = False
    allowed_hosts: Optional[tuple[str, ...]] = None
    budget: BindingBudget = dataclasses.field(default_factory=BindingBudget)


CodeExecutionPolicy = Callable[[str, CodeExecutionGrant], CodeExecutionGrant]
"""`policy(tenant, grant) -> grant`: receives the grant so far and returns one no wider. One that
returns a wider grant is a deployment error, and run_code reports it as one."""
