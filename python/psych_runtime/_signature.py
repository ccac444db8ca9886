"""A Python function as a tool's interface: its JSON schema generated from the type hints, and the
arguments of one call checked and converted back to what the hints say (an Enum member, a
dataclass), so the schema the program reads and the checks its call meets are one definition."""
from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any

from ._fields import describe_hint, union_members

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


class UnsupportedHint(TypeError):
    pass


def _is_typeddict(hint: Any) -> bool:
    return typing.is_typeddict(hint)


def schema_of(hint: Any) -> dict[str, Any]:
    """The JSON schema of one type hint; UnsupportedHint for a hint JSON cannot carry."""
    if hint is Any:
        return {}
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    members = union_members(hint)
    if members is not None:
        return {"anyOf": [schema_of(m) for m in members]}
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        values = typing.get_args(hint)
        for value in values:
            if not isinstance(value, (str, int, float, bool)) and value is not None:
                raise UnsupportedHint(f"Literal value {value!r} is not a JSON scalar")
        return {"enum": list(values)}
    if hint is list or origin is list:
        args = typing.get_args(hint)
        return {"type": "array", "items": schema_of(args[0])} if args else {"type": "array"}
    if hint is dict or origin is dict:
        args = typing.get_args(hint)
        if not args:
            return {"type": "object"}
        if args[0] is not str:
            raise UnsupportedHint("JSON object keys are strings: use dict[str, ...]")
        return {"type": "object", "additionalProperties": schema_of(args[1])}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        values = [member.value for member in hint]
        for value in values:
            if not isinstance(value, (str, int, float, bool)):
                raise UnsupportedHint(f"{hint.__name__} has a value that is not a JSON scalar: {value!r}")
        return {"enum": values}
    if _is_typeddict(hint):
        hints = typing.get_type_hints(hint)
        required = sorted(hint.__required_keys__)
        return _object_schema({name: schema_of(h) for name, h in hints.items()}, required)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        hints = typing.get_type_hints(hint)
        fields = [f for f in dataclasses.fields(hint) if f.init]
        required = [f.name for f in fields
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        return _object_schema({f.name: schema_of(hints[f.name]) for f in fields}, required)
    raise UnsupportedHint("JSON cannot carry it")


def _object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


def _parameters(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    return list(inspect.signature(fn).parameters.values())


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    target: Any = fn
    while isinstance(target, functools.partial):
        target = target.func
    if isinstance(target, type):
        target = target.__init__
    elif not (inspect.isfunction(target) or inspect.ismethod(target)) and callable(target):
        target = type(target).__call__  # a callable object: its __call__ carries the hints
    try:
        return typing.get_type_hints(target)
    except Exception:  # an unresolvable forward reference: each parameter is then judged as written
        return dict(getattr(target, "__annotations__", None) or {})


def input_schema(fn: Callable[..., Any], tool: str) -> dict[str, Any]:
    """The input schema of tool `tool` from `fn`'s parameters: each is a property, those without a
    default are required, nothing else is accepted. TypeError names a parameter that cannot be
    described (**kwargs, *args, a positional-only one, no hint, a hint JSON cannot carry)."""
    hints = _hints(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for parameter in _parameters(fn):
        where = f"tool {tool!r}: parameter {parameter.name!r}"
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            raise TypeError(f"{where} (**{parameter.name}) cannot be described by an input schema: "
                            "name each argument, or pass input_schema=")
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            raise TypeError(f"{where} (*{parameter.name}): a tool is called with named arguments only")
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(f"{where} is positional-only: a tool is called with named arguments only")
        if parameter.name not in hints:
            raise TypeError(f"{where} has no type hint, so no schema can be generated for it")
        hint = hints[parameter.name]
        try:
            properties[parameter.name] = schema_of(hint)
        except UnsupportedHint as why:
            raise TypeError(f"{where} has the hint {describe_hint(hint)}, which has no JSON schema: {why}") from None
        if parameter.default is inspect.Parameter.empty:
            required.append(parameter.name)
    return _object_schema(properties, required)


class ArgumentError(ValueError):
    """The arguments of one call do not fit the function: a malformed_call."""


class Binder:
    """Checks one call's arguments (a JSON object) against a function and converts each to what
    its hint says."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self._hints = _hints(fn)
        try:
            parameters = _parameters(fn)
        except (TypeError, ValueError):
            # No signature to read (some builtins): the explicit input_schema is all there is, and
            # the function itself judges what it is given.
            parameters = [inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)]
        self._accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
        named = [p for p in parameters if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                     inspect.Parameter.KEYWORD_ONLY)]
        self._names = {p.name for p in named}
        self._required = [p.name for p in named if p.default is inspect.Parameter.empty]

    def bind(self, arguments: Any) -> dict[str, Any]:
        if not isinstance(arguments, dict):
            raise ArgumentError(f"the arguments must be a JSON object, got {_json_kind(arguments)}")
        missing = [name for name in self._required if name not in arguments]
        if missing:
            raise ArgumentError(f"missing required argument {missing[0]!r}" + _known(self._names))
        if not self._accepts_any:
            unknown = sorted(name for name in arguments if name not in self._names)
            if unknown:
                raise ArgumentError(f"unknown argument {unknown[0]!r}" + _known(self._names))
        converted = {}
        for name, value in arguments.items():
            hint = self._hints.get(name, Any)
            try:
                converted[name] = convert(value, hint)
            except ArgumentError as why:
                raise ArgumentError(f"argument {name!r}: {why}") from None
        return converted


def _known(names: set[str]) -> str:
    return f" (the parameters are: {', '.join(sorted(names))})" if names else " (it takes no arguments)"


def convert(value: Any, hint: Any) -> Any:
    """A JSON value as `hint` has it; ArgumentError when it does not fit. A hint with no JSON
    meaning (a class of the tool's own) receives the value as it is."""
    if hint is Any:
        return value
    if hint is type(None):
        if value is None:
            return None
        raise ArgumentError(f"expected null, got {_json_kind(value)}")
    members = union_members(hint)
    if members is not None:
        if value is None and type(None) in members:
            return None
        reasons = []
        for member in members:
            if member is type(None):
                continue
            try:
                return convert(value, member)
            except ArgumentError as why:
                reasons.append(str(why))
        raise ArgumentError(" or ".join(reasons))
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        if value in typing.get_args(hint):
            return value
        raise ArgumentError(f"expected one of {list(typing.get_args(hint))!r}, got {value!r}")
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ArgumentError(f"expected a boolean, got {_json_kind(value)}")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ArgumentError(f"expected an integer, got {_json_kind(value)}")
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise ArgumentError(f"expected a number, got {_json_kind(value)}")
    if hint is str:
        if isinstance(value, str):
            return value
        raise ArgumentError(f"expected a string, got {_json_kind(value)}")
    if hint is list or origin is list:
        if not isinstance(value, list):
            raise ArgumentError(f"expected an array, got {_json_kind(value)}")
        args = typing.get_args(hint)
        return [convert(v, args[0]) for v in value] if args else value
    if hint is dict or origin is dict:
        if not isinstance(value, dict):
            raise ArgumentError(f"expected an object, got {_json_kind(value)}")
        args = typing.get_args(hint)
        return {k: convert(v, args[1]) for k, v in value.items()} if args else value
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            raise ArgumentError(f"expected one of {[m.value for m in hint]!r}, got {value!r}") from None
    if _is_typeddict(hint):
        return _convert_members(value, typing.get_type_hints(hint), hint.__required_keys__, dict)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        fields = [f for f in dataclasses.fields(hint) if f.init]
        required = {f.name for f in fields
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
        hints = typing.get_type_hints(hint)
        members = _convert_members(value, {f.name: hints[f.name] for f in fields}, required, dict)
        try:
            return hint(**members)
        except (TypeError, ValueError) as why:
            raise ArgumentError(str(why)) from None
    return value


def _convert_members(value: Any, hints: Mapping[str, Any], required: Any, make: Callable[..., Any]) -> Any:
    if not isinstance(value, dict):
        raise ArgumentError(f"expected an object, got {_json_kind(value)}")
    for name in sorted(required):
        if name not in value:
            raise ArgumentError(f"missing member {name!r}")
    for name in value:
        if name not in hints:
            raise ArgumentError(f"unknown member {name!r} (the members are: {', '.join(hints)})")
    return make({name: convert(v, hints[name]) for name, v in value.items()})


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "an array", dict: "an object"}.get(type(value), type(value).__name__)
