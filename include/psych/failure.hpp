#pragma once
// Why an execution did not complete, and why run_code refused to start one.
// Both are data handed back to the model, never exceptions; each kind says
// when it is used so that every backend picks the same one.
#include <cstdint>
#include <string>

#include "psych/names.hpp"

namespace psych {

enum class failure_kind {
  /// The program raised. The traceback, with the program's own line numbers,
  /// is attached; limit_hit is set when the exception was a limit surfacing
  /// (MemoryError under memory_bytes, EFBIG under file_size_bytes, ...).
  exception,
  /// The program did not compile. Carries the line; nothing executed.
  syntax_error,
  /// The program finished but its value cannot be carried as JSON
  /// (a set, NaN, a non-string key, an object). The message names the type.
  value_not_serializable,
  /// The wall clock ended the execution; the tree was killed.
  timeout,
  /// The caller cancelled; the tree was killed.
  cancelled,
  /// A cap other than the wall clock killed the interpreter outright (CPU
  /// time); limit_hit names it. A cap the program saw as an exception is
  /// `exception` with limit_hit set instead.
  limit_exceeded,
  /// The interpreter was ended by a signal no limit explains and the host did
  /// not send (SIGSEGV, SIGABRT, ...), or the launcher did not say how it
  /// ended. Carries the signal.
  crashed,
  /// The child broke the contract (a malformed or out-of-sequence frame, a
  /// wrong token). Names the contract error; output captured so far is kept.
  protocol_violation,
  /// The containment the child reported is below the requested isolation
  /// level. The host sent `abort`: nothing of the program executed.
  isolation_unavailable,
  /// The launcher could not set up the sandbox (names the stage, the system
  /// call and errno). Nothing of the program executed.
  launch_failed,
  /// A remote backend failed (a non-200, a stream that ended early, a
  /// malformed frame). Never retried.
  provider_error,
  /// OutputPolicy.preserve is REQUIRED and the bytes could not be preserved: no BlobStore is
  /// wired (refused before anything ran), or the store failed (the captured bytes are still in
  /// the result's data fields).
  preservation_unavailable,
  /// The channel to the program reached end of file before `done`: the program
  /// closed it, or the interpreter exited without reporting a result. No result
  /// can arrive any more, so the host ended the tree at once instead of waiting
  /// for the wall clock. Carries the exit status when the interpreter exited by
  /// itself. A limit or a signal of the interpreter's own that explains the end
  /// takes precedence (`limit_exceeded`, `crashed`).
  channel_closed,
};
PSYCH_ENUM_NAMES(failure_kind, "exception", "syntax_error", "value_not_serializable", "timeout",
                 "cancelled", "limit_exceeded", "crashed", "protocol_violation",
                 "isolation_unavailable", "launch_failed", "provider_error", "preservation_unavailable",
                 "channel_closed");

struct sandbox_failure {
  failure_kind kind = failure_kind::crashed;
  std::string message;
  std::string traceback;  ///< exception / syntax_error only
  std::int64_t line = 0;  ///< the program's line, 0 when unknown
  friend bool operator==(const sandbox_failure&, const sandbox_failure&) = default;
};

/// Why run_code returned a refusal instead of running anything. The agent's
/// other tools keep working; only an unknown profile is louder than this.
enum class refusal_reason {
  /// The Spec asked for network and the backend, the tenant policy or the
  /// profile does not grant it.
  network_not_granted,
  /// The Spec's minimum isolation level is above what this backend reaches.
  isolation_unreachable,
  /// describe() says the backend is not ready (a missing launcher or
  /// interpreter, a failed probe); its problems are attached.
  backend_not_ready,
};
PSYCH_ENUM_NAMES(refusal_reason, "network_not_granted", "isolation_unreachable",
                 "backend_not_ready");

struct refusal {
  refusal_reason reason;
  std::string message;
  friend bool operator==(const refusal&, const refusal&) = default;
};

}  // namespace psych
