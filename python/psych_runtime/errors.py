"""The exceptions of the Python face, and how a compiled `_psych.Failure` becomes one of them.

Failures of a *program* are never exceptions: they are data in the result. These are for the
deployment's mistakes (a sandbox that cannot be set up, a spec that cannot be published) and for a
direct tool call that produced no result.
"""
from __future__ import annotations

from typing import Any

# The ToolError kinds a call can end with (C++ tool_errors.hpp), in its order.
TOOL_ERROR_KINDS: tuple[str, ...] = (
    "unknown_tool", "unavailable_binding", "excluded_builtin", "denied", "approval_required_in_program",
    "budget_exhausted", "argument_too_large", "binding_result_too_large", "binding_result_not_paged",
    "tool_failed", "cancelled", "timeout", "unknown_outcome", "malformed_call", "http_error",
    "input_required",
)

# The psych error kinds that mean "this sandbox cannot be set up here" (C++ error_kind).
SETUP_KINDS = frozenset({"sandbox_setup", "launcher_unavailable", "interpreter_unavailable"})


class SandboxSetupError(Exception):
    """No backend can be set up as asked (nothing reaches the isolation, a launcher or interpreter is
    missing, a profile name nothing is registered under). Nothing is ever installed or pulled to
    make it work: the message says what to install or configure."""

    def __init__(self, message: str, kind: str = "sandbox_setup") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind


class PublishError(ValueError):
    """A spec that cannot be published: it claims run_code, lists a binding the agent does not hold,
    is granted a tool the runtime does not have, or names a profile that is not registered."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class PsychError(RuntimeError):
    """Any other failure of the compiled module, with psych's error kind (e.g. blob_not_found,
    output_pattern_rejected, invalid_argument for a policy that widened its grant)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}" if not message.startswith(kind) else message)
        self.kind = kind
        self.message = message


class ToolCallError(Exception):
    """A tool call produced no result. `kind` is one of TOOL_ERROR_KINDS: branch on it, never on the
    message. A CodeTool's function may raise it to end a call with a kind of its own choosing."""

    def __init__(self, kind: str, message: str = "") -> None:
        super().__init__(f"{kind}: {message}" if message else kind)
        self.kind = kind
        self.message = message


def translate(failure: Any, *, publishing: bool = False) -> Exception:
    """The exception to raise for a compiled `_psych.Failure` (anything with .kind and .message)."""
    kind = str(getattr(failure, "kind", "") or "unknown")
    message = str(getattr(failure, "message", "") or failure)
    if kind in SETUP_KINDS:
        return SandboxSetupError(message, kind)
    if publishing and kind == "invalid_argument":
        return PublishError(message)
    return PsychError(kind, message)
