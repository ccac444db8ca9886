"""What one execution hands back (C++ sandbox_result.hpp, as host/result_json.hpp encodes it).

Failures are data: stdout, stderr and the full traceback come back in the result, never raised.
Grades and kinds that arrive under a spelling this version does not know are kept as strings.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ._fields import Struct, signed
from ._json import WireError, from_json
from .budget import MeterReadings
from .enums import AttachmentLocation, Enforcement, FailureKind, IsolationLevel, OmissionReason, RefusalReason


@dataclass(frozen=True)
class GuaranteeGrades(Struct):
    """One grade per guarantee. ENFORCED: the execution observed it hold; UNVERIFIED: requested and
    nothing contradicted it; UNAVAILABLE: this platform does not offer it. Nothing is assumed."""

    filesystem: Enforcement | str = Enforcement.UNAVAILABLE
    network: Enforcement | str = Enforcement.UNAVAILABLE
    process_tree: Enforcement | str = Enforcement.UNAVAILABLE
    identity: Enforcement | str = Enforcement.UNAVAILABLE
    cpu: Enforcement | str = Enforcement.UNAVAILABLE
    memory: Enforcement | str = Enforcement.UNAVAILABLE
    file_size: Enforcement | str = Enforcement.UNAVAILABLE
    process_count: Enforcement | str = Enforcement.UNAVAILABLE
    wall_clock: Enforcement | str = Enforcement.UNAVAILABLE
    environment: Enforcement | str = Enforcement.UNAVAILABLE


@dataclass(frozen=True)
class SandboxFailure(Struct):
    """Why an execution did not complete. `traceback` (exception, syntax_error) carries the
    program's own line numbers; `line` is the program's line, 0 when unknown."""

    kind: FailureKind | str = FailureKind.CRASHED
    message: str = ""
    traceback: str = ""
    line: int = signed(0)


@dataclass(frozen=True)
class Refusal(Struct):
    """run_code refused to start an execution: nothing ran. The agent's other tools keep working."""

    reason: RefusalReason | str
    message: str = ""


@dataclass(frozen=True)
class ResultAttachment(Struct):
    """One item of a result (stdout, stderr, value, or "artifact:<path>") as the model's payload
    carries it: a deterministic preview, and where the rest lives."""

    name: str = ""
    handle: str = ""
    content_type: str = ""
    size_bytes: int = 0
    truncated: bool = False
    location: AttachmentLocation | str = AttachmentLocation.INLINE
    bytes_let_go: int = 0
    preview: str = ""


@dataclass(frozen=True)
class Artifact(Struct):
    """A file the program left in its workspace, by workspace-relative path."""

    path: str
    size_bytes: int = 0
    data: bytes = b""


@dataclass(frozen=True)
class EgressRefusal(Struct):
    """One connection psych's egress proxy refused or ended. `host` is as the program named it;
    `reason` is an RFC 9209 Proxy-Status error type ("destination_ip_prohibited",
    "http_request_denied", "tls_protocol_error", ...); `detail` is the proxy's own words."""

    host: str = ""
    port: int = signed(0)
    reason: str = ""
    detail: str = ""


@dataclass(frozen=True)
class EgressReport(Struct):
    """What a network=ALLOWLIST execution's connections through the egress proxy did: its network
    meters. `refusals` are the latest (at most 32), `refusals_omitted` those beyond them."""

    connections_allowed: int = signed(0)
    """Reached a listed host."""
    connections_refused: int = signed(0)
    """Refused before reaching anything."""
    connections_cut: int = signed(0)
    """Allowed, then ended by a bound (idle, lifetime, bytes)."""
    bytes_sent: int = signed(0)
    bytes_received: int = signed(0)
    refusals: tuple[EgressRefusal, ...] = ()
    refusals_omitted: int = signed(0)


@dataclass(frozen=True)
class SandboxResult(Struct):
    """Every field of the spec's "Results".

    `value` is what the top-level code evaluated to, decoded from JSON; None both when the program
    returned nothing and when it returned None (JSON does not distinguish them either).
    `limit_hit` names the cap that ended the execution (cpu_seconds, wall_seconds, memory_bytes,
    file_size_bytes, process_count), or None on a clean end or a plain program error. `egress` is
    what the program's connections through psych's egress proxy did: None unless the execution
    ran under network=ALLOWLIST."""

    stdout: str = ""
    stderr: str = ""
    stdout_data: bytes = b""
    stderr_data: bytes = b""
    stdout_size: int = 0
    stderr_size: int = 0
    value: Any = dataclasses.field(default=None, hash=False)
    failure: Optional[SandboxFailure] = None
    artifacts: tuple[Artifact, ...] = ()
    artifacts_omitted: int = 0
    artifacts_omitted_by_reason: dict[OmissionReason | str, int] = dataclasses.field(default_factory=dict, hash=False)
    attachments: tuple[ResultAttachment, ...] = ()
    duration_seconds: float = 0.0
    limit_hit: Optional[str] = None
    cancelled: bool = False
    isolation: Optional[IsolationLevel | str] = None
    guarantees: GuaranteeGrades = dataclasses.field(default_factory=GuaranteeGrades)
    network_denied: bool = False
    problems: tuple[str, ...] = ()
    bindings_spent: MeterReadings = dataclasses.field(default_factory=MeterReadings)
    unavailable_bindings: tuple[str, ...] = ()
    egress: Optional[EgressReport] = None

    @property
    def ok(self) -> bool:
        return self.failure is None


def result_from_compiled(result_json: str | dict[str, Any], stdout: bytes, stderr: bytes,
                         artifact_data: Sequence[bytes]) -> SandboxResult:
    """A SandboxResult from what the compiled run returns: the JSON (which leaves the captured
    bytes out) and the bytes beside it, artifacts in the JSON's order."""
    data = json.loads(result_json) if isinstance(result_json, str) else result_json
    result: SandboxResult = from_json(SandboxResult, data)
    if len(artifact_data) != len(result.artifacts):
        raise WireError(f"the result lists {len(result.artifacts)} artifacts and {len(artifact_data)} came beside it")
    artifacts = tuple(dataclasses.replace(a, data=bytes(d)) for a, d in zip(result.artifacts, artifact_data))
    return dataclasses.replace(result, stdout_data=bytes(stdout), stderr_data=bytes(stderr), artifacts=artifacts)


@dataclass(frozen=True)
class RunCodeOutcome:
    """One run_code call: a refusal (nothing ran) or the result, and `payload`, the JSON text the
    model reads back (previews, handles, and grades only where one fell short of the ask)."""

    refusal: Optional[Refusal]
    result: Optional[SandboxResult]
    payload: str

    @classmethod
    def from_compiled(cls, outcome_json: str, stdout: bytes, stderr: bytes, artifact_data: Sequence[bytes],
                      payload: str) -> "RunCodeOutcome":
        data = json.loads(outcome_json)
        if isinstance(data, dict) and "refused" in data:
            return cls(refusal=from_json(Refusal, data["refused"]), result=None, payload=payload)
        return cls(refusal=None, result=result_from_compiled(data, stdout, stderr, artifact_data), payload=payload)


@dataclass(frozen=True)
class OutputLine(Struct):
    number: int = 0
    """0-based line index in the whole output."""
    text: str = ""


@dataclass(frozen=True)
class OutputWindow(Struct):
    """One window of a preserved output (read_tool_output), by line window or by pattern."""

    lines: tuple[OutputLine, ...] = ()
    total_lines: int = 0
    total_bytes: int = 0
    next_offset: Optional[int] = None
    """Where the next window starts, if anything is left."""
    line_truncated: bool = False
    search_cut: bool = False


@dataclass(frozen=True)
class OutputRequest(Struct):
    """What to read: `limit` lines from line `offset`, or with `pattern` the lines matching it."""

    offset: int = 0
    limit: int = 100
    pattern: Optional[str] = None
