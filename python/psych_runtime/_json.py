"""The one conversion between the value types and the C++ JSON (psych/protocol/json.hpp's field
walk): a dataclass is an object keyed by its field names, an enum is its value (the C++ spelling),
a tuple is an array, and None is *left out* — the C++ decoder reads an absent member as its own
default (nullopt for an optional), so leaving it out is right for optional members and for the
"every member optional" option structs alike, where null would be an error for a plain member.

Where the Python face names a field differently from the C++ struct, or carries one the C++
JSON does not (captured bytes travel beside the JSON, not in it), the tables below say so: one
place, rather than a hand-written converter per class.

Decoding is tolerant the way the C++ decode_json is: a member this side does not know is skipped
(a newer peer may add one), and an enum spelling it does not know is kept as the string it came as.
"""
from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any, TypeVar

from ._fields import hints_of, is_enum_type, union_members

T = TypeVar("T")

# Python field name -> C++ JSON member name, per class (by class name).
RENAMES: dict[str, dict[str, str]] = {
    "BindingBudget": {"max_total_bytes": "max_transfer_bytes"},
    "AgentSpec": {"code_execution": "code"},
    "ProfileStatus": {"description": "described"},
}

# Fields the C++ JSON does not carry, per class: they travel beside it or stay on this side.
PYTHON_ONLY: dict[str, frozenset[str]] = {
    "SandboxResult": frozenset({"stdout_data", "stderr_data"}),
    "Artifact": frozenset({"data"}),
    "CodeTool": frozenset({"fn", "description", "input_schema", "destructive"}),
}

# A class that stands for one alternative of a C++ struct with a discriminating member (a CodeTool
# and an HttpTool are both a tool_ref) declares `_wire_tag = (member, spelling)`: encoding writes the
# member, and decoding a union of such classes picks the one whose spelling the data carries.
WIRE_TAG = "_wire_tag"


class WireError(ValueError):
    """JSON that does not fit the type it was decoded as (a contract mismatch with the C++)."""


def _json_name(cls: type, name: str) -> str:
    return RENAMES.get(cls.__name__, {}).get(name, name)


def _python_only(cls: type) -> frozenset[str]:
    return PYTHON_ONLY.get(cls.__name__, frozenset())


def to_json(value: Any) -> Any:
    """`value` as the JSON-able structure the C++ decoder expects."""
    if isinstance(value, enum.Enum):  # first: a StrEnum member is a str too
        return value.value
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        out: dict[str, Any] = {}
        tag = getattr(cls, WIRE_TAG, None)
        if tag is not None:
            out[tag[0]] = tag[1]
        skipped = _python_only(cls)
        for f in dataclasses.fields(value):
            member = getattr(value, f.name)
            if f.name in skipped or member is None:
                continue
            out[_json_name(cls, f.name)] = to_json(member)
        return out
    if isinstance(value, (tuple, list)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(to_json(k)): to_json(v) for k, v in value.items()}
    raise TypeError(f"{type(value).__name__} has no JSON form")


def to_json_text(value: Any) -> str:
    """Compact JSON text; NaN and infinities are refused, as the C++ codec refuses them."""
    return json.dumps(to_json(value), separators=(",", ":"), allow_nan=False, ensure_ascii=False)


def from_json(hint: Any, data: Any, path: str = "$") -> Any:
    """`data` (parsed JSON) as a value of type `hint`."""
    if hint is Any:
        return data
    if hint is type(None):
        if data is None:
            return None
        raise WireError(f"{path}: expected null, got {_kind(data)}")
    members = union_members(hint)
    if members is not None:
        return _from_union(members, data, path)
    if is_enum_type(hint):
        if not isinstance(data, str):
            raise WireError(f"{path}: expected a string, got {_kind(data)}")
        try:
            return hint(data)
        except ValueError:
            return data  # a spelling of a newer peer: kept as it came
    if dataclasses.is_dataclass(hint):
        return _from_object(hint, data, path)
    origin = getattr(hint, "__origin__", None)
    if origin is tuple:
        if not isinstance(data, list):
            raise WireError(f"{path}: expected an array, got {_kind(data)}")
        args = hint.__args__
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_json(args[0], v, f"{path}[{i}]") for i, v in enumerate(data))
        if len(args) != len(data):
            raise WireError(f"{path}: expected an array of {len(args)}, got {len(data)}")
        return tuple(from_json(a, v, f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, data)))
    if origin is dict:
        if not isinstance(data, dict):
            raise WireError(f"{path}: expected an object, got {_kind(data)}")
        key_hint, value_hint = hint.__args__
        return {from_json(key_hint, k, path): from_json(value_hint, v, f"{path}.{k}") for k, v in data.items()}
    if hint is bool:
        if isinstance(data, bool):
            return data
    elif hint is int:
        if isinstance(data, int) and not isinstance(data, bool):
            return data
    elif hint is float:
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return float(data)
    elif hint is str:
        if isinstance(data, str):
            return data
    else:
        raise TypeError(f"{path}: the JSON codec does not know {hint!r}")
    raise WireError(f"{path}: expected {hint.__name__}, got {_kind(data)}")


def from_json_text(hint: type[T], text: str) -> T:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise WireError(f"not JSON: {error}") from None
    return from_json(hint, data)


def _from_union(members: tuple[Any, ...], data: Any, path: str) -> Any:
    if data is None and type(None) in members:
        return None
    tagged = [m for m in members if getattr(m, WIRE_TAG, None) is not None]
    if tagged and isinstance(data, dict):
        for member in tagged:
            key, spelling = getattr(member, WIRE_TAG)
            if data.get(key) == spelling:
                return _from_object(member, data, path)
    failures = []
    for member in members:
        if member is type(None):
            continue
        try:
            return from_json(member, data, path)
        except WireError as error:
            failures.append(str(error))
    raise WireError("; ".join(failures) or f"{path}: no alternative fits {_kind(data)}")


def _from_object(cls: type, data: Any, path: str) -> Any:
    if not isinstance(data, dict):
        raise WireError(f"{path}: expected an object ({cls.__name__}), got {_kind(data)}")
    hints = hints_of(cls)
    skipped = _python_only(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init or f.name in skipped:
            continue
        name = _json_name(cls, f.name)
        if name not in data:
            continue  # the dataclass's default, as the C++ keeps its own for an absent member
        kwargs[f.name] = from_json(hints[f.name], data[name], f"{path}.{name}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as error:
        raise WireError(f"{path}: {error}") from None


def _kind(data: Any) -> str:
    if data is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "an array", dict: "an object"}.get(type(data), type(data).__name__)
