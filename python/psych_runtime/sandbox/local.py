"""Local backends: the strongest this host offers that reaches the isolation asked for.

local_sandbox picks the strongest local backend that reaches at least `isolation` and raises
SandboxSetupError with install guidance when nothing does; it never silently hands back something
weaker. Nothing is ever installed, downloaded or pulled implicitly: a missing bwrap is a
configuration error you learn about from detect_local_backends() or describe().
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from .._fields import Struct
from .._json import from_json, to_json_text
from ..description import BackendInfo
from ..enums import IsolationLevel
from ..errors import SandboxSetupError, translate
from ..limits import LimitCaps, SandboxLimits
from .port import CompiledSandbox


@dataclass(frozen=True)
class PreparedPool(Struct):
    """Sandboxes prepared before their request (C++ prepared_pool_options)."""

    size: int = 0


@dataclass(frozen=True)
class LocalSandboxOptions(Struct):
    """C++ local_sandbox_options. A member left None is left out of the JSON, so the C++ default
    holds (the interpreter found on PATH, the package's launcher, /tmp, ...)."""

    isolation: IsolationLevel = IsolationLevel.PROCESS
    python_bin: Optional[str] = None
    limit_ceiling: Optional[LimitCaps] = None
    env_allowlist: Optional[tuple[str, ...]] = None
    allowed_hosts: Optional[tuple[str, ...]] = None
    allow_same_uid: bool = False
    backend: Optional[str] = None
    launcher_path: Optional[str] = None
    temp_root: Optional[str] = None
    pool: Optional[PreparedPool] = None


class LocalSandbox(CompiledSandbox):
    """A local backend, probed and ready. `isolation` is the minimum it was asked to reach, and what
    run() asks for unless told otherwise."""

    def __init__(self, compiled: Any, isolation: IsolationLevel) -> None:
        super().__init__(compiled, minimum_isolation=isolation, name="local")
        self.isolation = isolation


def _options(isolation: IsolationLevel, python_bin: Optional[str],
             default_limits: "SandboxLimits | LimitCaps | None", env_allowlist: Optional[Sequence[str]],
             allow_same_uid: bool, backend: Optional[str], temp_root: Optional[str], prepared: int,
             launcher_path: Optional[str], allowed_hosts: Optional[Sequence[str]] = None) -> LocalSandboxOptions:
    for name, value in (("env_allowlist", env_allowlist), ("allowed_hosts", allowed_hosts)):
        if isinstance(value, str):
            raise TypeError(f"{name} must be a sequence of str, not one str")
    return LocalSandboxOptions(
        isolation=isolation, python_bin=python_bin,
        limit_ceiling=None if default_limits is None else LimitCaps.of(default_limits),
        env_allowlist=None if env_allowlist is None else tuple(env_allowlist),
        allowed_hosts=None if allowed_hosts is None else tuple(allowed_hosts),
        allow_same_uid=allow_same_uid, backend=backend, launcher_path=launcher_path, temp_root=temp_root,
        pool=PreparedPool(size=prepared) if prepared else None)


def _installed_launcher() -> str:
    from .. import _paths

    try:
        return str(_paths.launcher_path())
    except FileNotFoundError as missing:
        raise SandboxSetupError(str(missing)) from None


def local_sandbox(
    isolation: IsolationLevel = IsolationLevel.PROCESS,
    python_bin: Optional[str] = None,
    default_limits: "SandboxLimits | LimitCaps | None" = None,
    env_allowlist: Optional[Sequence[str]] = None,
    allow_same_uid: bool = False,
    *,
    backend: Optional[str] = None,
    prepared: int = 0,
    temp_root: Optional[str] = None,
    allowed_hosts: Optional[Sequence[str]] = None,
) -> LocalSandbox:
    """The strongest local backend that reaches at least `isolation`, probed before it is handed
    back (this blocks for the probe, as opening a backend does).

    `default_limits` is the backend's ceiling: the most any execution on it may have (a smaller
    everyday limit is a profile's hard_limits). `env_allowlist` names the host variables the child
    may see; nothing else is inherited. `allow_same_uid` accepts a child that runs as the worker's
    own uid (identity is then UNAVAILABLE). `backend` pins one backend by name ("linux-process",
    "linux-namespaces", ...); `prepared` keeps that many sandboxes launched and waiting.
    `allowed_hosts` caps network=ALLOWLIST on this backend: no execution reaches a host beyond these
    patterns, whatever its Spec and profile name (None: no cap of its own; a pattern that does not
    parse is a PsychError, invalid_argument). The allowlist itself needs isolation=ISOLATED: the
    process backend shares the host's network and refuses it (docs/network.md)."""
    from .. import _psych

    options = _options(isolation, python_bin, default_limits, env_allowlist, allow_same_uid, backend, temp_root,
                       prepared, _installed_launcher(), allowed_hosts)
    try:
        compiled = _psych.local_sandbox(to_json_text(options))
    except _psych.Failure as failure:
        raise translate(failure) from None
    return LocalSandbox(compiled, isolation)


def detect_local_backends(
    isolation: IsolationLevel = IsolationLevel.PROCESS,
    python_bin: Optional[str] = None,
    default_limits: "SandboxLimits | LimitCaps | None" = None,
    env_allowlist: Optional[Sequence[str]] = None,
    allow_same_uid: bool = False,
    *,
    backend: Optional[str] = None,
    temp_root: Optional[str] = None,
) -> tuple[BackendInfo, ...]:
    """Every local backend of every platform, available or not, with the reason: name, isolation,
    available, reason. Another platform's backend is listed as not available here."""
    from .. import _psych

    try:
        launcher: Optional[str] = _installed_launcher()
    except SandboxSetupError:
        launcher = None  # the C++ then reports the launcher it cannot find, per backend
    options = _options(isolation, python_bin, default_limits, env_allowlist, allow_same_uid, backend, temp_root,
                       0, launcher)
    try:
        text = _psych.detect_local_backends(to_json_text(options))
    except _psych.Failure as failure:
        raise translate(failure) from None
    return from_json(tuple[BackendInfo, ...], json.loads(text))
