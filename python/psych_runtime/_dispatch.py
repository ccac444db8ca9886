"""The dispatch the compiled ToolSource calls for every call of a CodeTool: the model's direct
call and a program's binding alike, so both reach the function the same way.

It is called on a C++ pool thread with the GIL held, as (name, arguments_json, stop_token), and
answers (True, value_json) or (False, kind, message). Nothing may escape it: a tool that raises is a
tool_failed outcome for the program to read, never a crash of the host.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import enum
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Optional, Protocol

from ._signature import ArgumentError, Binder
from .errors import TOOL_ERROR_KINDS, ToolCallError
from .tools import CodeTool

POLL_SECONDS = 0.05  # how soon an async tool notices that the program stopped waiting


class StopToken(Protocol):
    def stop_requested(self) -> bool: ...


class _Stopped(Exception):
    pass


class _NotSerialisable(TypeError):
    def __init__(self, value: Any) -> None:
        super().__init__(type(value).__name__)
        self.type_name = type(value).__name__


LoopSource = Callable[[], Optional[asyncio.AbstractEventLoop]]


class ToolDispatch:
    """Runs the registered CodeTools. An async tool runs on the event loop the Runtime recorded as
    its own (so it may share that loop's clients and locks), or in a fresh loop when none is
    recorded or it is gone; a sync tool runs right on the calling pool thread."""

    def __init__(self, tools: Mapping[str, CodeTool], loop: LoopSource) -> None:
        self._tools = {name: (tool, Binder(tool.fn)) for name, tool in tools.items() if tool.fn is not None}
        self._loop = loop

    def __call__(self, name: str, arguments_json: str, stop: StopToken) -> tuple[Any, ...]:
        try:
            return self._dispatch(name, arguments_json, stop)
        except BaseException as error:  # noqa: BLE001 — the host must get an outcome, whatever happened
            try:
                return (False, "tool_failed", f"{type(error).__name__}: {error}")
            except BaseException:  # noqa: BLE001 — an exception whose str() raises
                return (False, "tool_failed", "the tool failed, and its error could not be described")

    def _dispatch(self, name: str, arguments_json: str, stop: StopToken) -> tuple[Any, ...]:
        entry = self._tools.get(name)
        if entry is None:
            return (False, "unknown_tool", f"no tool named {name!r} is registered with this runtime")
        tool, binder = entry
        try:
            arguments = json.loads(arguments_json)
        except (TypeError, ValueError) as error:
            return (False, "malformed_call", f"the arguments are not JSON: {error}")
        try:
            kwargs = binder.bind(arguments)
        except ArgumentError as error:
            return (False, "malformed_call", f"{name}: {error}")
        try:
            value = tool.fn(**kwargs)  # type: ignore[misc]
            if inspect.isawaitable(value):
                value = self._await(value, stop)
        except _Stopped:
            return (False, "cancelled", f"{name} was cancelled: the program stopped waiting for it")
        except (asyncio.CancelledError, concurrent.futures.CancelledError):
            return (False, "cancelled", f"{name} was cancelled on the host")
        except ToolCallError as error:
            if error.kind in TOOL_ERROR_KINDS:
                return (False, error.kind, error.message)
            return (False, "tool_failed", f"{name} raised ToolCallError of unknown kind {error.kind!r}: {error.message}")
        except Exception as error:  # noqa: BLE001 — the tool's own failure, as data
            return (False, "tool_failed", f"{type(error).__name__}: {error}")
        try:
            return (True, json.dumps(value, allow_nan=False, ensure_ascii=False, default=_jsonable))
        except _NotSerialisable as error:
            return (False, "tool_failed",
                    f"{name} returned a value of type {error.type_name}, which is not JSON-serialisable")
        except ValueError as error:
            return (False, "tool_failed", f"{name} returned a value JSON cannot carry: {error}")
        except RecursionError:
            return (False, "tool_failed", f"{name} returned a value that refers to itself")

    def _await(self, awaitable: Awaitable[Any], stop: StopToken) -> Any:
        loop = self._loop()
        if loop is None or loop.is_closed() or not loop.is_running():
            return asyncio.run(_until_stopped(awaitable, stop))
        if _running_loop() is loop:
            # Waiting here would block the very loop the tool needs; the compiled module never
            # calls dispatch on the loop's thread, so this is a wiring mistake, reported as one.
            _close(awaitable)
            raise RuntimeError("an async tool was called on its own event loop's thread")
        future = asyncio.run_coroutine_threadsafe(_as_coroutine(awaitable), loop)
        while True:
            done, _ = concurrent.futures.wait((future,), timeout=POLL_SECONDS)
            if done:
                return future.result()
            if stop.stop_requested():
                future.cancel()
                raise _Stopped


async def _as_coroutine(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


async def _until_stopped(awaitable: Awaitable[Any], stop: StopToken) -> Any:
    task = asyncio.ensure_future(awaitable)
    while not task.done():
        await asyncio.wait((task,), timeout=POLL_SECONDS)
        if not task.done() and stop.stop_requested():
            task.cancel()
            await asyncio.wait((task,))
            raise _Stopped
    return task.result()


def _running_loop() -> Optional[asyncio.AbstractEventLoop]:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _close(awaitable: Awaitable[Any]) -> None:
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()


def _jsonable(value: Any) -> Any:
    # What a tool may return beyond plain JSON types: its own dataclasses and enums.
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    raise _NotSerialisable(value)
