"""Profiles: backends and their hard limits, wired by the deployment under logical names. An
agent's Spec asks for a profile by name and for terms no wider than it.

The terms of one execution are the intersection of four things, in this order, each only
narrowing: what the backend can provide (describe()), what the tenant's policy allows, what the
AgentSpec asks for, and what the profile's hard_limits cap. A cap of 10 wall seconds and an agent
asking for 60 gives 10; asking for 5 gives 5. allow_network=False on the profile and
network=UNRESTRICTED in the Spec gives a refusal, not network; network=ALLOWLIST reaches only the
hosts that the backend's cap, the policy, the profile's allowed_hosts and the Spec all allow.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import KW_ONLY, dataclass
from typing import Optional

from .._fields import Struct
from ..budget import BindingBudget
from ..limits import LimitCaps, SandboxLimits
from .port import Sandbox


@dataclass(frozen=True)
class SandboxProfile(Struct):
    """One backend under a name, with the deployment's word on it.

    `hard_limits` caps each dimension it sets: a LimitCaps caps only the dimensions given; a
    SandboxLimits caps all five (its defaults included). `binding_budget` bounds what programs under
    this profile may spend through their tool calls; a policy may narrow it, a Spec cannot raise it.
    `allowed_hosts` (host patterns, docs/network.md) are what a network=ALLOWLIST execution under
    this profile may reach when allow_network is False; empty: none. A pattern that does not parse
    fails the Runtime that wires the profile.
    """

    name: str
    sandbox: Sandbox
    _: KW_ONLY
    hard_limits: Optional[LimitCaps] = None
    allow_network: bool = False
    allowed_hosts: tuple[str, ...] = ()
    binding_budget: BindingBudget = dataclasses.field(default_factory=BindingBudget)

    def __post_init__(self) -> None:
        if isinstance(self.hard_limits, SandboxLimits):
            object.__setattr__(self, "hard_limits", LimitCaps.of(self.hard_limits))
        super().__post_init__()
        if not self.name:
            raise ValueError("SandboxProfile: name must not be empty")

    @property
    def caps(self) -> LimitCaps:
        return self.hard_limits or LimitCaps()


class SandboxProfiles:
    """The profiles of one Runtime, by name; a name registered twice is a ValueError."""

    def __init__(self, profiles: Iterable[SandboxProfile]) -> None:
        self._profiles: dict[str, SandboxProfile] = {}
        for profile in profiles:
            if not isinstance(profile, SandboxProfile):
                raise TypeError(f"SandboxProfiles takes SandboxProfile values, got {type(profile).__name__}")
            if profile.name in self._profiles:
                raise ValueError(f"sandbox profile {profile.name!r} is registered twice")
            self._profiles[profile.name] = profile

    def __iter__(self) -> Iterator[SandboxProfile]:
        return iter(self._profiles.values())

    def __len__(self) -> int:
        return len(self._profiles)

    def __contains__(self, name: object) -> bool:
        return name in self._profiles

    def __getitem__(self, name: str) -> SandboxProfile:
        return self._profiles[name]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._profiles)

    def __repr__(self) -> str:
        return f"SandboxProfiles({list(self._profiles.values())!r})"
