#pragma once
// Why a binding call produced no result: the closed set of ToolError kinds a program may branch
// on (`except ToolError as e: if e.kind == "budget_exhausted": ...`). Every backend and the host
// pick the same kind for the same cause; each kind carries the one sentence a program author
// needs, which the bootstrap's ToolError documentation and docs/kinds.md repeat.
#include <array>
#include <string_view>

#include "psych/names.hpp"

namespace psych {

enum class tool_error_kind {
  /// No tool of that name is offered to this program (not in TOOLS). Check TOOLS before calling.
  unknown_tool,
  /// The program's spec lists this binding, but it no longer resolves to a tool the agent may call
  /// (withdrawn by policy or its server went away). It is never replaced by another tool.
  unavailable_binding,
  /// A runtime built-in that programs may not call (it would suspend, outlive or reach outside the
  /// execution); the message is the built-in's own reason.
  excluded_builtin,
  /// The policy refused this call, as it would have refused the same direct call by the model.
  denied,
  /// The tool needs a person's approval, which cannot be given inside a program: have the model
  /// call it directly. Refused before the tool ran.
  approval_required_in_program,
  /// A meter of the binding budget ran out (the message names it: calls, transfer, produced,
  /// preserved). Later calls will fail the same way; the execution itself goes on.
  budget_exhausted,
  /// The arguments are larger than the per-call ceiling (argument_bytes). Send less per call.
  argument_too_large,
  /// A window asked of a result handle is wider than the per-call transfer ceiling. Read smaller
  /// windows.
  binding_result_too_large,
  /// The result is over the transfer ceiling and was not preserved, so it cannot be paged through
  /// a handle. It is refused whole, never truncated.
  binding_result_not_paged,
  /// The tool ran and reported an error of its own; the message is the tool's.
  tool_failed,
  /// The call was cancelled on the host (the execution ended, or the run was cancelled).
  cancelled,
  /// The tool did not answer within its time limit. Whether it had an effect is unknown.
  timeout,
  /// The call may or may not have happened: a worker died with it in flight. It is counted, and it
  /// is never re-run; check the tool's own state before trying again.
  unknown_outcome,
  /// The call itself was malformed (arguments not a JSON object, a name that is not a string, a
  /// frame the host could not read). Nothing was called.
  malformed_call,
  /// An HTTP tool's server answered with a status that is not 2xx. The message starts with it
  /// ("HTTP 404: ..."), followed by an excerpt of the server's answer (none for 401 and 403).
  http_error,
  /// The tool (an A2A peer's task) stopped to ask for input or authorisation, which a program
  /// cannot give: have the model call it directly. The message is the peer's question.
  input_required,
};
PSYCH_ENUM_NAMES(tool_error_kind, "unknown_tool", "unavailable_binding", "excluded_builtin", "denied",
                 "approval_required_in_program", "budget_exhausted", "argument_too_large",
                 "binding_result_too_large", "binding_result_not_paged", "tool_failed", "cancelled", "timeout",
                 "unknown_outcome", "malformed_call", "http_error", "input_required");

/// The sentence a program author needs for each kind, in declaration order.
inline constexpr std::array<std::string_view, enum_names<tool_error_kind>::spellings.size()> tool_error_guidance{
    "No tool of that name is offered to this program; check TOOLS before calling.",
    "This binding no longer resolves to a tool the agent may call; it is never replaced by another.",
    "This runtime built-in cannot be called from a program; the message says why.",
    "The policy refused this call, as it would refuse the same call made directly.",
    "This tool needs a person's approval, which a program cannot obtain: have the model call it directly.",
    "A binding budget meter ran out (the message names it); later calls fail the same way, the program goes on.",
    "The arguments exceed the per-call ceiling; send less per call.",
    "The window asked for is wider than the per-call transfer ceiling; read smaller windows.",
    "The result is too large to hand over and was not preserved, so it cannot be paged; it is refused whole.",
    "The tool ran and reported an error of its own; the message is the tool's.",
    "The call was cancelled on the host.",
    "The tool did not answer in time; whether it had an effect is unknown.",
    "The call may have happened before a worker died; it is counted and never re-run, so check before retrying.",
    "The call was malformed (arguments must be a JSON object); nothing was called.",
    "The HTTP server answered with an error status; the message starts with it (\"HTTP 404: ...\").",
    "The tool stopped to ask for input or authorisation, which a program cannot give: have the model call it directly.",
};

constexpr std::string_view guidance_for(tool_error_kind kind) noexcept {
  return tool_error_guidance[static_cast<std::size_t>(kind)];
}

}  // namespace psych
