#pragma once
// Expected failures of psych itself (not of the program it runs: those are
// failure_kind values inside a sandbox_result). Each kind carries the rule of
// when to use it, as abseil's status codes do. A contract violation inside
// psych is a bug and traps; it never becomes one of these.
#include <string>
#include <string_view>

#include "psych/names.hpp"

namespace psych {

enum class error_kind {
  // --- framing (the bounded NDJSON reader) ---
  /// One frame exceeded its byte ceiling; detected while the bytes arrived.
  frame_too_large,
  /// A whole stream exceeded its byte ceiling.
  stream_too_large,
  /// A stream carried more frames than its ceiling allows.
  too_many_frames,
  /// A stream carried more empty lines than its ceiling allows.
  too_many_empty_lines,
  /// The stream ended in the middle of a frame (no terminating newline).
  truncated_frame,

  // --- JSON (the codec) ---
  /// Bytes that are not valid UTF-8.
  json_invalid_utf8,
  /// The same key twice in one object; ambiguous, so refused.
  json_duplicate_key,
  /// NaN or an infinity, which JSON cannot carry.
  json_non_finite,
  /// Nesting deeper than the codec's depth cap.
  json_too_deep,
  /// Bytes after the one JSON value of a frame.
  json_trailing_bytes,
  /// Any other malformed JSON.
  json_malformed,

  // --- frames (the contract on top of JSON) ---
  /// A frame that is not an object, or whose `type` is missing or not a string.
  frame_missing_type,
  /// A `type` this channel does not carry.
  frame_unknown_type,
  /// A member whose JSON kind does not match the contract (a string where a number belongs).
  frame_wrong_kind,
  /// A required member is absent.
  frame_missing_member,
  /// A member the type does not have, where the decoder was asked to refuse them (the arguments of
  /// a typed function tool: a misspelt argument must not be silently dropped).
  frame_unknown_member,
  /// An enum member spelled in a way the contract does not know.
  frame_bad_enum,
  /// An integer that does not fit the member's type.
  frame_number_out_of_range,
  /// A well-formed frame arriving where the contract does not allow it
  /// (a `done` before `run`, a token that does not match).
  frame_out_of_sequence,

  // --- configuration: the deployment's or the caller's mistake ---
  /// A limit that is negative, zero, NaN or infinite.
  invalid_limit,
  /// An argument or configuration value that cannot be used (names the value).
  invalid_argument,
  /// A program or configuration file that could not be read.
  unreadable_file,

  // --- setup: the host cannot provide a sandbox ---
  /// No local backend reaches the requested isolation; carries install guidance.
  sandbox_setup,
  /// The launcher executable is missing or not executable, or the launcher ended before it
  /// read its orders.
  launcher_unavailable,
  /// The interpreter is missing, not executable, or a shim that cannot run sandboxed.
  interpreter_unavailable,
  /// An operating-system call failed; the detail names the call and errno.
  system_call_failed,

  // --- the run log ---
  /// A run log whose records are damaged before its last one (a torn last record is tolerated).
  run_log_corrupt,

  // --- preserved output ---
  /// No blob of that handle for this tenant (another tenant's handle is exactly this too).
  blob_not_found,
  /// A stored blob that no longer matches its content address, or a store that cannot be used.
  blob_store_failed,
  /// A read_tool_output pattern refused before any search: invalid, too long, or too complex for
  /// the engine's memory budget (the detail says which).
  output_pattern_rejected,
  /// A read_tool_output window wider than its byte ceiling; ask for fewer lines.
  output_window_too_large,
  /// A sandbox service failed: the connection, TLS, an HTTP status, or its stream (remote backend).
  provider_error,
};

PSYCH_ENUM_NAMES(error_kind, "frame_too_large", "stream_too_large", "too_many_frames",
                 "too_many_empty_lines", "truncated_frame", "json_invalid_utf8",
                 "json_duplicate_key", "json_non_finite", "json_too_deep", "json_trailing_bytes",
                 "json_malformed", "frame_missing_type", "frame_unknown_type", "frame_wrong_kind",
                 "frame_missing_member", "frame_unknown_member", "frame_bad_enum", "frame_number_out_of_range",
                 "frame_out_of_sequence", "invalid_limit", "invalid_argument", "unreadable_file",
                 "sandbox_setup", "launcher_unavailable", "interpreter_unavailable",
                 "system_call_failed", "run_log_corrupt", "blob_not_found", "blob_store_failed",
                 "output_pattern_rejected", "output_window_too_large", "provider_error");

struct error {
  error_kind kind;
  std::string detail;

  /// "kind: detail", the form every psych message takes.
  [[nodiscard]] std::string message() const {
    std::string text{name_of(kind)};
    if (!detail.empty()) text.append(": ").append(detail);
    return text;
  }
};

}  // namespace psych
