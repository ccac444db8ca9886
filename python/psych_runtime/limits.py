"""Limits: three shapes of the same five dimensions (C++ limits.hpp).

- SandboxLimits: what one execution gets, every dimension a value (the wall clock always applies).
  A backend's ceiling and a policy's grant are these too.
- LimitCaps: the deployment's caps (a profile's hard limits, a backend's configured ceiling), each
  dimension optional. An unset cap leaves that dimension to the terms before it; it is never a
  default.
- CodeExecutionLimits: an agent's requests in a Spec, each optional; None means "whatever the
  profile allows".
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from ._fields import Struct, positive

MIB = 1 << 20


@dataclass(frozen=True)
class SandboxLimits(Struct):
    """What a backend enforces; every dimension a positive, finite value."""

    cpu_seconds: float = positive(10.0)
    """CPU consumed, not wall clock: a program waiting on a binding's reply burns none."""
    address_space_bytes: int = positive(512 * MIB)
    """Address space to a process backend, a cgroup to a container, a job commit limit on
    Windows. Spelled memory_bytes in CodeExecutionLimits and in limit_hit."""
    file_size_bytes: int = positive(10 * MIB)
    process_count: int = positive(64)
    """Includes the sandbox interpreter and the processes it creates."""
    wall_seconds: float = positive(30.0)


@dataclass(frozen=True)
class LimitCaps(Struct):
    """Caps on some dimensions (C++ limit_caps): each the SandboxLimits member of the same name, or
    None for "no cap here"."""

    cpu_seconds: Optional[float] = positive(None)
    address_space_bytes: Optional[int] = positive(None)
    file_size_bytes: Optional[int] = positive(None)
    process_count: Optional[int] = positive(None)
    wall_seconds: Optional[float] = positive(None)

    @classmethod
    def of(cls, limits: "SandboxLimits | LimitCaps | None") -> "LimitCaps":
        """Caps from either shape: a SandboxLimits caps every dimension (its defaults included)."""
        if limits is None:
            return cls()
        if isinstance(limits, LimitCaps):
            return limits
        if isinstance(limits, SandboxLimits):
            return cls(**{f.name: getattr(limits, f.name) for f in dataclasses.fields(SandboxLimits)})
        raise TypeError(f"expected SandboxLimits, LimitCaps or None, got {type(limits).__name__}")


@dataclass(frozen=True)
class CodeExecutionLimits(Struct):
    """What an agent asks for in its Spec, per dimension; None: whatever the profile allows."""

    cpu_seconds: Optional[float] = positive(None)
    wall_seconds: Optional[float] = positive(None)
    memory_bytes: Optional[int] = positive(None)
    file_size_bytes: Optional[int] = positive(None)
    process_count: Optional[int] = positive(None)
