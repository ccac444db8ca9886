"""The closed sets of names, each member's value spelled exactly as the C++ spells it
(PSYCH_ENUM_NAMES), so the JSON codec needs no table of its own.

They are StrEnums, so a member also compares equal to its spelling (`result.failure.kind ==
"exception"`), and a value that comes *from* C++ (a result, a description) in a spelling this
version does not know — a newer service may add one — is kept as the plain string it arrived as,
and compares the same way.
"""
from __future__ import annotations

import enum


class IsolationLevel(enum.StrEnum):
    """A Spec asks for a minimum; a backend reports what it reached."""

    PROCESS = "process"
    """A separate process with limits, a scrubbed environment and a killable tree, but no kernel
    boundary."""
    ISOLATED = "isolated"
    """A kernel boundary, not this process's word."""


class Enforcement(enum.StrEnum):
    """How strongly one guarantee held in one execution."""

    ENFORCED = "enforced"
    """The execution observed the guarantee hold."""
    UNVERIFIED = "unverified"
    """The mechanism was requested and nothing contradicted it."""
    UNAVAILABLE = "unavailable"
    """This platform does not offer it, and the result says so rather than implying it."""


class NetworkAccess(enum.StrEnum):
    """Off by default; a grant has to come from both the profile and the Spec."""

    NONE = "none"
    UNRESTRICTED = "unrestricted"
    ALLOWLIST = "allowlist"
    """Only the hosts the allowed_hosts patterns name, through psych's egress proxy
    (docs/network.md); the backend, the policy, the profile and the Spec each narrow the list."""


class OutputPreservation(enum.StrEnum):
    REQUIRED = "required"
    """No BlobStore wired fails the call loudly rather than quietly dropping bytes."""
    WHEN_AVAILABLE = "when_available"
    """Keep the preview and record how many bytes were let go."""


class ArtifactCollection(enum.StrEnum):
    NONE = "none"
    COLLECT = "collect"


class WorkspacePolicy(enum.StrEnum):
    """The workspace is a fresh empty directory every time; there is no other policy."""

    EPHEMERAL = "ephemeral"


class ToolKind(enum.StrEnum):
    """What a Spec grants: a registered CodeTool or an HttpTool (C++ tool_kind)."""

    CODE = "code"
    HTTP = "http"


class FailureKind(enum.StrEnum):
    """Why an execution did not complete (C++ failure_kind)."""

    EXCEPTION = "exception"
    SYNTAX_ERROR = "syntax_error"
    VALUE_NOT_SERIALIZABLE = "value_not_serializable"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    LIMIT_EXCEEDED = "limit_exceeded"
    CRASHED = "crashed"
    PROTOCOL_VIOLATION = "protocol_violation"
    ISOLATION_UNAVAILABLE = "isolation_unavailable"
    LAUNCH_FAILED = "launch_failed"
    PROVIDER_ERROR = "provider_error"
    PRESERVATION_UNAVAILABLE = "preservation_unavailable"
    CHANNEL_CLOSED = "channel_closed"


class RefusalReason(enum.StrEnum):
    """Why run_code returned a refusal instead of running anything (C++ refusal_reason)."""

    NETWORK_NOT_GRANTED = "network_not_granted"
    ISOLATION_UNREACHABLE = "isolation_unreachable"
    BACKEND_NOT_READY = "backend_not_ready"


class AttachmentLocation(enum.StrEnum):
    """Where the rest of a result item lives (C++ attachment_location)."""

    INLINE = "inline"
    BLOB = "blob"
    PREVIEW_ONLY = "preview_only"


class OmissionReason(enum.StrEnum):
    """Why a workspace entry was not collected as an artifact (C++ omission_reason)."""

    SYMLINK = "symlink"
    HARDLINK = "hardlink"
    DEVICE = "device"
    FIFO = "fifo"
    SOCKET = "socket"
    SPECIAL = "special"
    TOO_LARGE = "too_large"
    TOO_MANY = "too_many"
    TOO_DEEP = "too_deep"
    UNREADABLE = "unreadable"


class RunAsMode(enum.StrEnum):
    """Where a child's uid comes from (C++ run_as_mode)."""

    PER_EXECUTION = "per_execution"
    SHARED = "shared"
    WORKER = "worker"
