"""The one field walk every value type shares: each frozen dataclass checks its fields against
their type hints when it is built, so a wrong type is a TypeError naming the parameter and a value
outside its range is a ValueError, before anything reaches the compiled module (whose decoder would
only say so later, and less helpfully)."""
from __future__ import annotations

import collections.abc
import dataclasses
import enum
import functools
import math
import types
import typing
from typing import Any

# Field metadata keys. Integers are the C++ uint64 unless marked signed (int64).
POSITIVE = "positive"  # > 0 (and finite): a limit dimension, a timeout
SIGNED = "signed"

_UINT64_END = 1 << 64
_INT64_MIN, _INT64_END = -(1 << 63), 1 << 63


def positive(default: Any = dataclasses.MISSING, **kwargs: Any) -> Any:
    """A field whose value, when set, must be positive and finite."""
    return dataclasses.field(default=default, metadata={POSITIVE: True}, **kwargs)


def signed(default: Any = dataclasses.MISSING, **kwargs: Any) -> Any:
    """An int64 field (the unmarked integers are uint64 and may not be negative)."""
    return dataclasses.field(default=default, metadata={SIGNED: True}, **kwargs)


@functools.cache
def hints_of(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def union_members(hint: Any) -> tuple[Any, ...] | None:
    """The members of a Union / `X | Y`, or None when `hint` is not one."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return None


def describe_hint(hint: Any) -> str:
    if hint is type(None):
        return "None"
    members = union_members(hint)
    if members is not None:
        return " | ".join(describe_hint(m) for m in members)
    if isinstance(hint, type) and typing.get_origin(hint) is None:
        return hint.__name__
    return repr(hint).replace("typing.", "")


class _Mismatch(Exception):
    pass


def conform(value: Any, hint: Any) -> Any:
    """`value` as `hint` has it: lists become tuples where a tuple is hinted (values stay
    hashable), ints become floats where a float is hinted. Raises _Mismatch otherwise."""
    if hint is Any:
        return value
    if hint is type(None):
        if value is None:
            return None
        raise _Mismatch
    members = union_members(hint)
    if members is not None:
        if value is None and type(None) in members:
            return None
        for member in members:
            try:
                return conform(value, member)
            except _Mismatch:
                continue
        raise _Mismatch
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        if value in typing.get_args(hint):
            return value
        raise _Mismatch
    if origin is tuple:
        if not isinstance(value, (tuple, list)):
            raise _Mismatch
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(conform(v, args[0]) for v in value)
        if len(args) != len(value):
            raise _Mismatch
        return tuple(conform(v, a) for v, a in zip(args, value, strict=True))
    if origin in (dict, collections.abc.Mapping):
        if not isinstance(value, collections.abc.Mapping):
            raise _Mismatch
        key_hint, value_hint = typing.get_args(hint) or (Any, Any)
        return {conform(k, key_hint): conform(v, value_hint) for k, v in value.items()}
    if origin is collections.abc.Callable or hint is collections.abc.Callable:
        if callable(value):
            return value
        raise _Mismatch
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise _Mismatch
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _Mismatch
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise _Mismatch
    if hint is bytes:
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise _Mismatch
    if isinstance(hint, type):
        if isinstance(value, hint):
            return value
        raise _Mismatch
    return value  # a hint this walk does not model (a TypeVar, a string): not ours to refuse


def _check_range(owner: str, name: str, value: Any, meta: collections.abc.Mapping[str, Any]) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{owner}: {name} must be a finite number, got {value!r}")
        if meta.get(POSITIVE) and value <= 0:
            raise ValueError(f"{owner}: {name} must be a positive, finite number, got {value!r}")
        if not meta.get(SIGNED) and value < 0:
            raise ValueError(f"{owner}: {name} must not be negative, got {value!r}")
    elif isinstance(value, int):
        if meta.get(POSITIVE) and value <= 0:
            raise ValueError(f"{owner}: {name} must be a positive number, got {value!r}")
        low, end = (_INT64_MIN, _INT64_END) if meta.get(SIGNED) else (0, _UINT64_END)
        if not low <= value < end:
            kind = "a signed 64-bit integer" if meta.get(SIGNED) else "a non-negative 64-bit integer"
            raise ValueError(f"{owner}: {name} must be {kind}, got {value!r}")


def check_fields(obj: Any) -> None:
    """Every field of dataclass `obj` against its hint and range; normalises in place."""
    cls = type(obj)
    hints = hints_of(cls)
    for f in dataclasses.fields(obj):
        hint = hints[f.name]
        value = getattr(obj, f.name)
        try:
            conformed = conform(value, hint)
        except _Mismatch:
            raise TypeError(
                f"{cls.__name__}: {f.name} must be {describe_hint(hint)}, "
                f"got {type(value).__name__} {_excerpt(value)}"
            ) from None
        _check_range(cls.__name__, f.name, conformed, f.metadata)
        if conformed is not value:
            object.__setattr__(obj, f.name, conformed)


def _excerpt(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Struct:
    """Base of the value types: frozen dataclasses that check themselves when built."""

    def __post_init__(self) -> None:
        check_fields(self)


def is_enum_type(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, enum.Enum)
