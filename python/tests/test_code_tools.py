"""Code tools, without the compiled module: schemas from type hints, the tools' dispatch, cancelling a blocking call."""
from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal, Optional, TypedDict

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psych_runtime as pr  # noqa: E402
from psych_runtime._blocking import call_blocking  # noqa: E402
from psych_runtime._dispatch import ToolDispatch  # noqa: E402


# -- schemas from type hints ---------------------------------------------------------------------


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class Address(TypedDict, total=False):
    city: str
    zip: int


@dataclasses.dataclass
class Line:
    sku: str
    quantity: int = 1


def test_schema_from_type_hints() -> None:
    async def order(sku: str, quantity: int, price: float, gift: bool, note: None, tags: list[str],
                    weights: dict[str, float], colour: Colour, size: Literal["s", "m"], address: Address,
                    line: Line, coupon: Optional[str] = None) -> dict:
        """Places an order."""
        return {}

    tool = pr.CodeTool("order", order)
    assert tool.description == "Places an order."
    assert tool.input_schema == {
        "type": "object",
        "properties": {
            "sku": {"type": "string"},
            "quantity": {"type": "integer"},
            "price": {"type": "number"},
            "gift": {"type": "boolean"},
            "note": {"type": "null"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "weights": {"type": "object", "additionalProperties": {"type": "number"}},
            "colour": {"enum": ["red", "green"]},
            "size": {"enum": ["s", "m"]},
            "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}},
                        "additionalProperties": False},
            "line": {"type": "object", "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer"}},
                     "required": ["sku"], "additionalProperties": False},
            "coupon": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "required": ["sku", "quantity", "price", "gift", "note", "tags", "weights", "colour", "size", "address", "line"],
        "additionalProperties": False,
    }


def test_an_explicit_schema_and_description_win() -> None:
    def f(**kwargs: object) -> None:
        """Doc."""

    tool = pr.CodeTool("f", f, description="mine", input_schema={"type": "object"}, destructive=True)
    assert tool.description == "mine" and tool.input_schema == {"type": "object"} and tool.destructive


def test_unsupported_parameters_are_type_errors_naming_them() -> None:
    def with_kwargs(sku: str, **extra: str) -> None: ...
    def with_set(skus: set[str]) -> None: ...
    def without_hint(sku) -> None: ...  # type: ignore[no-untyped-def]
    def with_int_keys(m: dict[int, str]) -> None: ...

    with pytest.raises(TypeError, match="extra"):
        pr.CodeTool("a", with_kwargs)
    with pytest.raises(TypeError, match=r"skus.*set\[str\]"):
        pr.CodeTool("b", with_set)
    with pytest.raises(TypeError, match="sku.*no type hint"):
        pr.CodeTool("c", without_hint)
    with pytest.raises(TypeError, match="'m'"):
        pr.CodeTool("d", with_int_keys)


# -- the tools' dispatch -------------------------------------------------------------------------


class Stop:
    def __init__(self) -> None:
        self.requested = False

    def stop_requested(self) -> bool:
        return self.requested


def dispatch_of(*tools: pr.CodeTool, loop: Optional[asyncio.AbstractEventLoop] = None) -> ToolDispatch:
    return ToolDispatch({t.name: t for t in tools}, lambda: loop)


def test_dispatch_calls_a_sync_tool_with_converted_arguments() -> None:
    seen = {}

    def lookup(sku: str, colour: Colour, line: Line, quantity: int = 1) -> dict:
        seen.update(colour=colour, line=line, thread=threading.current_thread())
        return {"sku": sku, "quantity": quantity}

    dispatch = dispatch_of(pr.CodeTool("lookup", lookup))
    answer = dispatch("lookup", json.dumps({"sku": "A-1", "colour": "red", "line": {"sku": "A-1"}}), Stop())
    assert answer == (True, json.dumps({"sku": "A-1", "quantity": 1}))
    assert seen["colour"] is Colour.RED and seen["line"] == Line("A-1")
    assert seen["thread"] is threading.current_thread()  # a sync tool runs on the calling thread


def test_dispatch_refuses_malformed_calls_naming_the_argument() -> None:
    dispatch = dispatch_of(pr.CodeTool("lookup", lambda sku, quantity=1: sku, input_schema={"type": "object"}))
    ok, kind, message = dispatch("lookup", json.dumps({"quantity": 2}), Stop())
    assert (ok, kind) == (False, "malformed_call") and "'sku'" in message
    ok, kind, message = dispatch("lookup", json.dumps({"sku": "a", "skus": 1}), Stop())
    assert (ok, kind) == (False, "malformed_call") and "'skus'" in message
    ok, kind, _ = dispatch("lookup", "[1, 2]", Stop())
    assert (ok, kind) == (False, "malformed_call")
    ok, kind, _ = dispatch("nothing", "{}", Stop())
    assert (ok, kind) == (False, "unknown_tool")

    def typed(quantity: int) -> int:
        return quantity

    ok, kind, message = dispatch_of(pr.CodeTool("typed", typed))("typed", '{"quantity": "two"}', Stop())
    assert (ok, kind) == (False, "malformed_call") and "quantity" in message


def test_dispatch_turns_failures_into_outcomes() -> None:
    def fails(sku: str) -> None:
        raise KeyError(sku)

    def returns_a_set() -> set:
        return {1}

    def refuses() -> None:
        raise pr.ToolCallError("denied", "not for this tenant")

    def odd_kind() -> None:
        raise pr.ToolCallError("no_such_kind", "x")

    dispatch = dispatch_of(pr.CodeTool("fails", fails), pr.CodeTool("returns_a_set", returns_a_set),
                           pr.CodeTool("refuses", refuses), pr.CodeTool("odd_kind", odd_kind))
    assert dispatch("fails", '{"sku": "Z-9"}', Stop()) == (False, "tool_failed", "KeyError: 'Z-9'")
    ok, kind, message = dispatch("returns_a_set", "{}", Stop())
    assert (ok, kind) == (False, "tool_failed") and "type set" in message and "not JSON-serialisable" in message
    assert dispatch("refuses", "{}", Stop()) == (False, "denied", "not for this tenant")
    assert dispatch("odd_kind", "{}", Stop())[1] == "tool_failed"


def test_dispatch_runs_an_async_tool_in_a_fresh_loop_when_none_is_recorded() -> None:
    async def slow(n: int) -> int:
        await asyncio.sleep(0.01)
        return n * 2

    assert dispatch_of(pr.CodeTool("slow", slow))("slow", '{"n": 21}', Stop()) == (True, "42")


def test_dispatch_runs_an_async_tool_on_the_recorded_loop() -> None:
    async def where() -> bool:
        return asyncio.get_running_loop() is recorded

    async def main() -> tuple:
        global recorded
        recorded = asyncio.get_running_loop()
        dispatch = dispatch_of(pr.CodeTool("where", where), loop=recorded)
        return await asyncio.get_running_loop().run_in_executor(None, dispatch, "where", "{}", Stop())

    assert asyncio.run(main()) == (True, "true")


def test_dispatch_cancels_an_async_tool_when_the_program_stops_waiting() -> None:
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    stop = Stop()
    threading.Timer(0.1, lambda: setattr(stop, "requested", True)).start()
    started = time.monotonic()
    ok, kind, _ = dispatch_of(pr.CodeTool("forever", forever))("forever", "{}", stop)
    assert (ok, kind) == (False, "cancelled")
    assert time.monotonic() - started < 5 and cancelled.is_set()

    async def on_recorded_loop() -> tuple:
        loop = asyncio.get_running_loop()
        stop = Stop()
        loop.call_later(0.1, lambda: setattr(stop, "requested", True))
        dispatch = dispatch_of(pr.CodeTool("forever", forever), loop=loop)
        return await loop.run_in_executor(None, dispatch, "forever", "{}", stop)

    cancelled.clear()
    assert asyncio.run(on_recorded_loop())[:2] == (False, "cancelled")
    assert cancelled.is_set()


# -- cancellation of a blocking call ---------------------------------------------------------------


class StopSource:
    """Stands for _psych.StopSource: the compiled run ends once a stop is requested."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def request_stop(self) -> bool:
        self.event.set()
        return True

    def stop_requested(self) -> bool:
        return self.event.is_set()


def test_cancelling_the_task_stops_the_call_and_waits_for_it() -> None:
    stop = StopSource()
    finished = threading.Event()

    def run() -> str:
        stop.event.wait(10)
        time.sleep(0.05)  # the tree being killed
        finished.set()
        return "cancelled result"

    async def main() -> None:
        with ThreadPoolExecutor(2) as pool:
            task = asyncio.ensure_future(call_blocking(pool, run, stop))
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # By the time the cancellation is seen, the compiled call has returned.
            assert stop.stop_requested() and finished.is_set()

    asyncio.run(main())


def test_a_second_cancellation_does_not_escape_early() -> None:
    stop = StopSource()
    finished = threading.Event()

    def run() -> None:
        stop.event.wait(10)
        time.sleep(0.2)
        finished.set()

    async def main() -> None:
        with ThreadPoolExecutor(2) as pool:
            task = asyncio.ensure_future(call_blocking(pool, run, stop))
            await asyncio.sleep(0.05)
            task.cancel()
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert finished.is_set()

    asyncio.run(main())


def test_a_blocking_call_returns_and_raises_as_called() -> None:
    async def main() -> None:
        with ThreadPoolExecutor(1) as pool:
            assert await call_blocking(pool, lambda: 7, StopSource()) == 7
            with pytest.raises(KeyError):
                await call_blocking(pool, lambda: {}["x"], StopSource())

    asyncio.run(main())
