"""Compiled calls that block (a probe, a program, a tool) run on a thread, awaited from asyncio.

The spec's clause "cancelling the asyncio task kills the tree" is kept here: a cancelled task asks
the compiled call to stop (the C++ kills the process tree and returns a result marked cancelled),
then waits for that call to return, and only then lets the cancellation propagate — so when the
caller sees CancelledError, no child, grandchild or listener of that execution is left.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import Any, Optional, Protocol, TypeVar

T = TypeVar("T")


class Stoppable(Protocol):
    def request_stop(self) -> bool: ...


def executor(name: str) -> concurrent.futures.ThreadPoolExecutor:
    # One thread per program in flight: a program holds its thread for up to its wall clock, so the
    # pool is sized for concurrency, not for CPU.
    return concurrent.futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix=name)


async def call_blocking(pool: concurrent.futures.Executor, call: Callable[[], T],
                        stop: Optional[Stoppable] = None) -> T:
    """`call()` on `pool`, awaited. With `stop`, cancelling the awaiting task requests the stop and
    waits for `call` to return before CancelledError propagates; without one (a probe, which runs no
    model-written code), the cancellation propagates at once and the call's outcome is dropped."""
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(pool, call)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        if stop is not None and not future.done():
            stop.request_stop()
            await _settle(future)
        else:
            future.add_done_callback(_drop_outcome)
        raise


async def _settle(future: "asyncio.Future[Any]") -> None:
    """Wait for `future` whatever happens to the waiting task meanwhile: a second cancellation must
    not let the first one escape while the tree may still be alive."""
    while not future.done():
        try:
            await asyncio.wait((future,))
        except asyncio.CancelledError:
            continue
    _drop_outcome(future)


def _drop_outcome(future: "asyncio.Future[Any]") -> None:
    # Retrieved so that asyncio does not log an exception nobody awaited; the caller was cancelled.
    if not future.cancelled():
        future.exception()
