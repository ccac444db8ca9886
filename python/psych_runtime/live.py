"""Live output: a program's stdout and stderr handed to the caller while it runs (docs/live-output.md).

The callback runs on the event loop that awaited the run, one chunk at a time and in order per
stream, so it may touch asyncio objects freely. psych's delivery thread waits for each call, so a
slow callback falls behind the way a slow C++ sink does: psych holds at most 1 MiB for it and skips
the rest, and the next chunk's `skipped` says how many bytes were not shown (the result still has
them all). The result itself does not change with a callback.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class OutputChunk:
    """Bytes of one stream as they arrived: `offset` counts every byte the program wrote to it,
    `skipped` the bytes just before `offset` this callback was not shown (it was behind)."""

    stream: str  # "stdout" or "stderr"
    offset: int
    data: bytes
    skipped: int


OutputCallback = Callable[[OutputChunk], None]

# How long psych's delivery thread waits for the loop to run one chunk's callback. A loop that does
# not get to it by then (blocked, or closing) loses that chunk, never the run.
_DELIVERY_WAIT_SECONDS = 5.0


def deliverer(callback: Optional[OutputCallback]) -> Optional[Callable[[str, int, bytes, int], None]]:
    """What the compiled run calls on psych's delivery thread, or None for no live output. Must be
    called on the event loop that awaits the run."""
    if callback is None:
        return None
    if not callable(callback):
        raise TypeError(f"on_output must be a callable taking an OutputChunk, got {type(callback).__name__}")
    loop = asyncio.get_running_loop()

    def deliver(stream: str, offset: int, data: bytes, skipped: int) -> None:
        done: concurrent.futures.Future[None] = concurrent.futures.Future()

        def on_loop() -> None:
            try:
                callback(OutputChunk(stream, offset, data, skipped))
            finally:
                done.set_result(None)

        try:
            loop.call_soon_threadsafe(on_loop)
        except RuntimeError:  # the loop is closed: nobody is left to show it to
            return
        try:
            done.result(timeout=_DELIVERY_WAIT_SECONDS)
        except concurrent.futures.TimeoutError:
            pass

    return deliver
