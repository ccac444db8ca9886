"""The tools an agent is granted (CodeTool, HttpTool) and the MCP servers a Runtime connects.

In a Spec a tool is only a name (C++ tool_ref: kind, name, url); the function behind a CodeTool
is the Runtime's business, registered with `Runtime(tools=...)`. A binding is the same tool the
model could have called directly, reached a different way.
"""
from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any, ClassVar, Optional

from ._fields import Struct, positive
from ._signature import input_schema as _generated_schema
from .core.code_execution import RUN_CODE_TOOL


@dataclass(frozen=True)
class CodeTool(Struct):
    """A Python function as a tool.

    `description` defaults to the function's docstring; `input_schema` (a JSON-schema dict) is
    generated from its type hints (str, int, float, bool, None, list[T], dict[str, T], Optional,
    Literal, Enum, TypedDict and dataclass parameters); a parameter without a default is required.
    `destructive=True` means the tool needs a person's approval, so a program's call is refused
    with approval_required_in_program before it runs; the model can still call it directly.

    A CodeTool without `fn` names a tool in a Spec (or an MCP tool `server__tool`)."""

    _wire_tag: ClassVar[tuple[str, str]] = ("kind", "code")

    name: str
    fn: Optional[Callable[..., Any]] = None
    _: KW_ONLY
    description: Optional[str] = None
    input_schema: Optional[dict[str, Any]] = dataclasses.field(default=None, hash=False)
    destructive: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.name:
            raise ValueError("CodeTool: name must not be empty")
        if self.fn is None:
            return
        if "__" in self.name:
            raise ValueError(f"CodeTool {self.name!r}: a name holding '__' addresses an MCP server's tool; "
                             "a function's tool cannot take it")
        if self.description is None:
            object.__setattr__(self, "description", inspect.getdoc(self.fn) or "")
        if self.input_schema is None:
            object.__setattr__(self, "input_schema", _generated_schema(self.fn, self.name))


@dataclass(frozen=True)
class HttpTool(Struct):
    """A tool that is one HTTP endpoint, granted by name and URL."""

    _wire_tag: ClassVar[tuple[str, str]] = ("kind", "http")

    name: str
    url: str

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.name:
            raise ValueError("HttpTool: name must not be empty")


Tool = CodeTool | HttpTool


def reserved_name_message(name: str) -> str | None:
    if name == RUN_CODE_TOOL:
        return ("run_code is a reserved tool name: a spec cannot claim it "
                "(code execution is turned on with code_execution)")
    return None


@dataclass(frozen=True)
class McpServer(Struct):
    """An MCP server over stdio: `command` is its program and arguments; `env` is added to the few
    variables every server inherits (the host's secrets are not handed over unasked); `timeout` is
    each request's limit, in seconds. Its tools are offered as `name__tool`."""

    name: str
    command: tuple[str, ...]
    env: Optional[dict[str, str]] = dataclasses.field(default=None, hash=False)
    timeout: float = positive(30.0)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_source_name("McpServer", self.name)
        if not self.command:
            raise ValueError(f"McpServer {self.name!r}: command must name a program")

    def wire(self) -> "McpStdioConfig":
        return McpStdioConfig(name=self.name, command=self.command, environment=dict(self.env or {}),
                              timeout_ms=_milliseconds(self.timeout))


@dataclass(frozen=True)
class _HttpSource(Struct):
    """A source reached over HTTP: `token` is a callable returning the bearer credential, resolved
    fresh per request; https is required unless the host is loopback or `allow_insecure_http` says
    the network in between is trusted."""

    name: str
    url: str
    token: Optional[Callable[[], Optional[str]]] = None
    ca_file: Optional[str] = None
    allow_insecure_http: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_source_name(type(self).__name__, self.name)

    def _wire_fields(self) -> dict[str, Any]:
        # Everything but the token: a credential never travels as JSON.
        return {"name": self.name, "url": self.url, "ca_file": self.ca_file,
                "allow_insecure_http": self.allow_insecure_http}


@dataclass(frozen=True)
class McpHttpServer(_HttpSource):
    """An MCP server over Streamable HTTP; its tools are offered as `name__tool`."""

    def wire(self) -> "McpHttpConfig":
        return McpHttpConfig(**self._wire_fields())


@dataclass(frozen=True)
class A2aPeer(_HttpSource):
    """An A2A peer: each skill of its agent card is a tool `name__skill`. Its card is read when the
    Runtime starts (a peer it cannot reach fails the Runtime then, not a program later).
    `timeout`: seconds per call, from the message to the task's terminal state."""

    timeout: float = positive(60.0)

    def wire(self) -> "A2aPeerConfig":
        return A2aPeerConfig(**self._wire_fields(), timeout_ms=_milliseconds(self.timeout))


def _check_source_name(kind: str, name: str) -> None:
    if not name or "__" in name:
        raise ValueError(f"{kind} name {name!r} cannot address tools: it is empty or holds '__'")


def _milliseconds(seconds: float) -> int:
    return max(1, round(seconds * 1000))


# What _psych.ToolSource reads for each server (its mcp_servers_json), by the C++ names.
@dataclass(frozen=True)
class McpStdioConfig(Struct):
    name: str
    command: tuple[str, ...]
    environment: dict[str, str] = dataclasses.field(default_factory=dict, hash=False)
    timeout_ms: int = 30000


@dataclass(frozen=True)
class McpHttpConfig(Struct):
    name: str
    url: str
    ca_file: Optional[str] = None
    allow_insecure_http: bool = False


@dataclass(frozen=True)
class A2aPeerConfig(McpHttpConfig):
    timeout_ms: int = 60000


def http_tokens(sources: "tuple[McpServer | _HttpSource, ...]") -> Mapping[str, Callable[[], Optional[str]]]:
    return {s.name: s.token for s in sources if isinstance(s, _HttpSource) and s.token is not None}
