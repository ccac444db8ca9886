"""What an AgentSpec says about code execution (C++ agent.hpp). An agent asks for a named profile
and terms no wider than it; it never holds a backend, a client or a credential. code_execution
joins the Version hash: an agent that can write and run a program is a different agent from one
that cannot."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from ._fields import Struct
from .enums import IsolationLevel, NetworkAccess
from .errors import PublishError
from .limits import CodeExecutionLimits
from .output import ArtifactPolicy, OutputPolicy
from .tools import CodeTool, HttpTool, reserved_name_message


@dataclass(frozen=True)
class ModelRef(Struct):
    model: str
    provider: str = ""


@dataclass(frozen=True)
class CodeExecution(Struct):
    """The agent opts in to run_code, under a named profile.

    `isolation` is a minimum. `bindings=None` means every tool this agent can currently call, after
    every narrowing plane, resolved at every turn boundary; a tuple narrows that set and never
    widens it. `limits` are requests, each None for "whatever the profile allows".

    `allowed_hosts` goes with network=ALLOWLIST: the host patterns asked for ("api.example.com",
    "*.example.com", "[2001:db8::1]:443"; without a port, 80 and 443). None leaves it out of the
    Spec's JSON, so a Spec without it keeps its Version hash; publish refuses a pattern that does
    not parse, an allowlist without hosts, and hosts without ALLOWLIST (docs/network.md)."""

    profile: str = "default"
    isolation: IsolationLevel = IsolationLevel.PROCESS
    bindings: Optional[tuple[str, ...]] = None
    limits: CodeExecutionLimits = dataclasses.field(default_factory=CodeExecutionLimits)
    network: NetworkAccess = NetworkAccess.NONE
    allowed_hosts: Optional[tuple[str, ...]] = None
    output: Optional[OutputPolicy] = None
    artifacts: Optional[ArtifactPolicy] = None


@dataclass(frozen=True)
class AgentSpec(Struct):
    """An agent as published. Without code_execution the agent is never shown run_code."""

    name: str
    model: ModelRef
    tools: tuple[CodeTool | HttpTool, ...] = ()
    code_execution: Optional[CodeExecution] = None

    def __post_init__(self) -> None:
        super().__post_init__()
        for tool in self.tools:
            reserved = reserved_name_message(tool.name)
            if reserved:
                raise PublishError(reserved)


@dataclass(frozen=True)
class AgentVersion:
    """A published spec and its Version hash (SHA-256 of the spec's canonical JSON, computed by the
    compiled runtime: stable across processes and builds)."""

    spec: AgentSpec
    hash: str
