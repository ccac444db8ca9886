"""What a backend says about itself, before anything runs (C++ host/sandbox.hpp, terms.hpp).
describe() never runs model-written code: it runs a fixed probe, which is what a health check in an
operator console should call."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from ._fields import Struct, signed
from .enums import IsolationLevel, NetworkAccess, RunAsMode
from .limits import SandboxLimits
from .output import ArtifactPolicy, OutputPolicy
from .results import GuaranteeGrades


@dataclass(frozen=True)
class RunAsReport(Struct):
    """Who the children of a root worker run as, and how many of those identities are free now."""

    mode: RunAsMode | str = RunAsMode.WORKER
    first: int = signed(0)
    count: int = signed(0)
    free: int = signed(0)
    held: int = signed(0)
    stray: int = signed(0)
    lock_dir: str = ""


@dataclass(frozen=True)
class Description(Struct):
    """ready, isolation, guarantees, mechanisms, problems and limit_ceiling: what this backend is,
    what it can prove, and what is wrong with it if anything is."""

    ready: bool = False
    backend: str = ""
    isolation: IsolationLevel | str = IsolationLevel.PROCESS
    guarantees: GuaranteeGrades = dataclasses.field(default_factory=GuaranteeGrades)
    mechanisms: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    limit_ceiling: SandboxLimits = dataclasses.field(default_factory=SandboxLimits)
    network: bool = False
    """Whether this backend can grant network at all."""
    network_allowlist: bool = False
    """Whether it can hold network=ALLOWLIST: a namespace that reaches only psych's egress proxy."""
    allowed_hosts: Optional[tuple[str, ...]] = None
    """The deployment's cap on the hosts an allowlist may name; None: no cap of its own."""
    interpreter: str = ""
    launcher: str = ""
    run_as: Optional[RunAsReport] = None
    """None: no probe ran."""


@dataclass(frozen=True)
class BackendInfo(Struct):
    """One local backend this host could offer, available or not, with the reason (why not, with
    install guidance; or what it uses)."""

    name: str = ""
    isolation: IsolationLevel | str = IsolationLevel.PROCESS
    available: bool = False
    reason: str = ""


@dataclass(frozen=True)
class BackendOffer(Struct):
    """What a backend claims without probing (C++ backend_offer): the first term of every
    intersection."""

    ready: bool = False
    isolation: IsolationLevel | str = IsolationLevel.PROCESS
    limit_ceiling: SandboxLimits = dataclasses.field(default_factory=SandboxLimits)
    network: bool = False
    network_allowlist: bool = False
    allowed_hosts: Optional[tuple[str, ...]] = None
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExecutionTerms(Struct):
    """The terms of one execution (C++ execution_terms)."""

    isolation: IsolationLevel = IsolationLevel.PROCESS
    limits: SandboxLimits = dataclasses.field(default_factory=SandboxLimits)
    network: NetworkAccess = NetworkAccess.NONE
    allowed_hosts: tuple[str, ...] = ()
    """With network=ALLOWLIST, the host patterns the execution may reach; otherwise empty."""
    output: OutputPolicy = dataclasses.field(default_factory=OutputPolicy)
    artifacts: ArtifactPolicy = dataclasses.field(default_factory=ArtifactPolicy)


@dataclass(frozen=True)
class ProfileStatus(Struct):
    """What verify_sandboxes() found for one profile: its describe(), no program run."""

    profile: str
    description: Description
