"""The Sandbox port: a run() and a describe(). Anything — a VM, a WASI runtime, a queue — that
satisfies `Sandbox` is a sandbox; nothing here names a tool registry. A sandbox receives a program
and its terms and returns a result; a run never raises for anything the program did.

`CompiledSandbox` is the port over a compiled psych::sandbox (the local, container and remote
backends), and the only kind a Runtime can wire into a profile.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
from collections.abc import Sequence
from typing import Any, Optional, Protocol, runtime_checkable

from ..live import OutputCallback, deliverer
from .._blocking import call_blocking, executor
from .._json import from_json_text, to_json_text
from ..description import BackendOffer, Description, ExecutionTerms
from ..enums import IsolationLevel, NetworkAccess
from ..errors import translate
from ..limits import SandboxLimits
from ..output import ArtifactPolicy, OutputPolicy
from ..results import SandboxResult, result_from_compiled


@runtime_checkable
class Sandbox(Protocol):
    async def describe(self) -> Description:
        """What this backend is, what it can prove, what is wrong with it: a fixed probe, never
        model-written code."""
        ...

    async def run(
        self,
        program: str,
        *,
        limits: Optional[SandboxLimits] = None,
        network: NetworkAccess = NetworkAccess.NONE,
        allowed_hosts: Sequence[str] = (),
        output: Optional[OutputPolicy] = None,
        artifacts: Optional[ArtifactPolicy] = None,
        isolation: Optional[IsolationLevel] = None,
        filename: str = "<program>",
        on_output: "Optional[OutputCallback]" = None,
    ) -> SandboxResult:
        """One program, no state kept from any other. `limits` default to the backend's ceiling;
        `isolation` to the sandbox's own minimum. A program that asked for more isolation than the
        backend provides is never run: the result carries an isolation_unavailable failure.
        `allowed_hosts` goes with network=ALLOWLIST: the host patterns the program may reach through
        psych's egress proxy (docs/network.md); the result's `egress` says what its connections did.
        Cancelling the awaiting task kills the process tree. `on_output(chunk)` receives the output
        as it arrives, on this event loop (psych_runtime.live)."""
        ...


class CompiledSandbox:
    """A compiled psych::sandbox behind the Sandbox port. Each blocking call runs on a thread pool
    this object owns; the event loop is never blocked."""

    def __init__(self, compiled: Any, *, minimum_isolation: Optional[IsolationLevel], name: str) -> None:
        self._compiled_sandbox = compiled
        self._minimum_isolation = minimum_isolation
        self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._name = name

    def _threads(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool is None:
            self._pool = executor(f"psych-{self._name}")
        return self._pool

    def offer(self) -> BackendOffer:
        """What the backend claims without probing (blocking: a remote backend may ask its service)."""
        from .. import _psych

        try:
            return from_json_text(BackendOffer, self._compiled_sandbox.offer())
        except _psych.Failure as failure:
            raise translate(failure) from None

    async def describe(self) -> Description:
        from .. import _psych

        try:
            text = await call_blocking(self._threads(), self._compiled_sandbox.describe)
        except _psych.Failure as failure:
            raise translate(failure) from None
        return from_json_text(Description, text)

    async def run(
        self,
        program: str,
        *,
        limits: Optional[SandboxLimits] = None,
        network: NetworkAccess = NetworkAccess.NONE,
        allowed_hosts: Sequence[str] = (),
        output: Optional[OutputPolicy] = None,
        artifacts: Optional[ArtifactPolicy] = None,
        isolation: Optional[IsolationLevel] = None,
        filename: str = "<program>",
        on_output: "Optional[OutputCallback]" = None,
    ) -> SandboxResult:
        from .. import _psych

        if not isinstance(program, str):
            raise TypeError(f"run: program must be str, got {type(program).__name__}")
        if not isinstance(filename, str):
            raise TypeError(f"run: filename must be str, got {type(filename).__name__}")
        if isinstance(allowed_hosts, str):
            raise TypeError("run: allowed_hosts must be a sequence of host patterns, not one str")
        # Checked before a thread is taken, so a wrong argument is an error at the call site.
        asked = ExecutionTerms(isolation=isolation or IsolationLevel.PROCESS, limits=limits or SandboxLimits(),
                               network=network, allowed_hosts=tuple(allowed_hosts), output=output or OutputPolicy(),
                               artifacts=artifacts or ArtifactPolicy())
        stop = _psych.StopSource()
        compiled = self._compiled_sandbox
        deliver = deliverer(on_output)

        def run_on_thread() -> tuple[str, bytes, bytes, list[bytes]]:
            terms = asked
            if limits is None or isolation is None:
                offer = self.offer()  # may block (a remote backend's description), so on this thread
                terms = dataclasses.replace(
                    asked, isolation=isolation or self._minimum_isolation or _known_level(offer.isolation),
                    limits=limits or offer.limit_ceiling)
            return compiled.run(program, to_json_text(terms), filename, stop, deliver)

        try:
            text, out, err, artifact_data = await call_blocking(self._threads(), run_on_thread, stop)
        except _psych.Failure as failure:
            raise translate(failure) from None
        return result_from_compiled(text, out, err, artifact_data)

    def close(self) -> None:
        """Waits for the calls in flight, then releases the threads."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def _known_level(level: IsolationLevel | str) -> IsolationLevel:
    # An offer in a spelling this version does not know cannot be asked for by name: ask for the
    # floor, and let the result report what the execution reached.
    return level if isinstance(level, IsolationLevel) else IsolationLevel.PROCESS


__all__ = ["Sandbox", "CompiledSandbox"]
