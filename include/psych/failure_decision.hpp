#pragma once
// Which one failure an execution ends with, decided from what happened. Pure: the session
// gathers the facts as the execution unfolds, and the precedence is written here once:
//   1. what kept the program from starting: launch_failed, then isolation_unavailable;
//   2. the child breaking the contract: protocol_violation;
//   3. a probe (describe()) ends without a failure;
//   4. what ended it from outside: cancelled, then timeout;
//   5. what the program reported itself in `done`: its value, or its own error;
//   6. how the interpreter ended without a report: a memory limit too small for it to start
//      (limit_exceeded), a limit (limit_exceeded), the channel closing first (channel_closed),
//      and otherwise a crash (crashed).
#include <array>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>

#include "psych/failure.hpp"
#include "psych/json_text.hpp"
#include "psych/limits.hpp"

namespace psych {

/// The program's own error, as its `done` frame reported it.
struct program_failure {
  failure_kind kind = failure_kind::exception;  ///< exception, syntax_error or value_not_serializable
  std::string type;                             ///< the exception's qualified name
  std::string message;
  std::string traceback;
  std::int64_t line = 0;                 ///< the program's own line, 0 when unknown
  std::optional<limit_name> limit_hint;  ///< a cap the child recognised in the exception chain
};

/// How the program ended by its own report.
struct program_report {
  bool ok = false;
  std::optional<json_text> value;        ///< when ok; JSON null is no value
  std::optional<program_failure> error;  ///< when not ok
};

/// How the interpreter ended, as the launcher's exit report says.
struct interpreter_exit {
  std::int64_t exit_code = -1;
  std::optional<std::string> signal;    ///< the terminating signal's name ("SIGSEGV"); nullopt: it exited
  std::optional<limit_name> limit_hit;  ///< the cap the launcher saw end it
  /// The signal was the launcher's kill, sent because the host cancelled: not one of the
  /// interpreter's own.
  bool killed_on_request = false;
};

/// Everything the precedence looks at, gathered by the session. Empty strings and nullopt mean
/// "did not happen".
struct execution_facts {
  std::string launch_failure;             ///< the sandbox was never set up: stage, call, errno
  std::string isolation_failure;          ///< the containment reached less than the terms demand
  std::optional<std::string> violation;   ///< the contract error the child committed
  bool probe_only = false;                ///< describe(): no program was meant to run
  bool cancelled = false;                 ///< the caller cancelled
  bool backstop_fired = false;            ///< the host's own wall-clock backstop had to cancel
  double wall_seconds = 0;                ///< the execution's wall clock, for the message
  std::optional<program_report> done;     ///< the program's `done`, if it sent one
  bool channel_closed = false;            ///< the channel reached end of file before `done`
  std::optional<interpreter_exit> exit;   ///< nullopt: the launcher did not report how it ended
  bool reported_containment = false;      ///< the child's hello came: the interpreter had started
  std::uint64_t memory_bytes = 0;         ///< the address-space limit it ran under; 0: not known
};

/// The address space CPython needs to start psych's runtime, measured with /usr/bin/python3 (3.11,
/// Debian 12, x86-64) by bisecting `psych run --memory-bytes N` on both Linux backends: 15.9 MiB
/// (`python3 -I -S -c pass` alone: 11.7 MiB). Below it the interpreter dies before it can say so:
/// a SIGSEGV, a loader error, a MemoryError in the bootstrap.
inline constexpr std::uint64_t interpreter_start_bytes = std::uint64_t{16} << 20;

/// An interpreter that died before its first report under a memory limit this small is taken to
/// have died of it: twice the figure above, for interpreters built larger than the one measured.
inline constexpr std::uint64_t too_small_to_start_bytes = 2 * interpreter_start_bytes;

struct failure_decision {
  std::optional<sandbox_failure> failure;
  std::optional<limit_name> limit_hit;  ///< the cap that ended it, or that the program's error surfaced
  std::optional<json_text> value;       ///< the program's value, on success only
};

namespace detail {

/// A double in its shortest round-trip spelling ("20", "0.5"), as the limits are written.
inline std::string shortest(double value) {
  std::array<char, 32> text{};
  const auto written = std::to_chars(text.data(), text.data() + text.size(), value);
  return std::string(text.data(), written.ptr);
}

inline std::string how_it_ended(const std::optional<interpreter_exit>& exit) {
  if (!exit) return "the launcher did not report how";
  if (exit->signal) return "killed by " + *exit->signal;
  return "exit status " + std::to_string(exit->exit_code);
}

}  // namespace detail

inline failure_decision decide_failure(const execution_facts& facts) {
  failure_decision decided;
  const auto fail = [&](failure_kind kind, std::string message) {
    decided.failure = sandbox_failure{kind, std::move(message)};
    return decided;
  };
  const bool too_small_to_start = facts.memory_bytes > 0 && facts.memory_bytes < too_small_to_start_bytes;
  const auto too_small = [&](const std::string& what_happened) {
    decided.limit_hit = limit_name::memory_bytes;
    return fail(failure_kind::limit_exceeded,
                "the memory limit of " + std::to_string(facts.memory_bytes) +
                    " bytes is below what the interpreter needs to start (about 16 MiB for CPython and psych's "
                    "runtime): " + what_happened);
  };
  // Under such a limit nothing can start, so the limit is the answer even when the start is what
  // failed (a container runtime refuses a memory limit below its own usage); the launch's own
  // words follow it.
  if (!facts.launch_failure.empty())
    return too_small_to_start ? too_small("the launch failed (" + facts.launch_failure + ")")
                              : fail(failure_kind::launch_failed, facts.launch_failure);
  if (!facts.isolation_failure.empty()) return fail(failure_kind::isolation_unavailable, facts.isolation_failure);
  if (facts.violation) return fail(failure_kind::protocol_violation, *facts.violation);
  if (facts.probe_only) return decided;
  if (facts.cancelled) return fail(failure_kind::cancelled, "the caller cancelled the execution");

  const auto& exit = facts.exit;
  const auto exit_limit = exit ? exit->limit_hit : std::nullopt;
  if (exit_limit == limit_name::wall_seconds || facts.backstop_fired) {
    decided.limit_hit = limit_name::wall_seconds;
    return fail(failure_kind::timeout, "the wall clock of " + detail::shortest(facts.wall_seconds) + " s ran out");
  }

  if (facts.done && facts.done->ok) {
    if (facts.done->value && facts.done->value->text != "null") decided.value = facts.done->value;
    return decided;
  }
  if (facts.done && facts.done->error) {
    const auto& e = *facts.done->error;
    const auto message = e.type.empty() ? e.message : e.message.empty() ? e.type : e.type + ": " + e.message;
    decided.failure = sandbox_failure{e.kind, message, e.traceback, e.line};
    decided.limit_hit = e.limit_hint;
    return decided;
  }

  if (!facts.reported_containment && too_small_to_start)
    return too_small("it ended before running the program (" + detail::how_it_ended(exit) + ")");
  if (exit_limit) {
    decided.limit_hit = exit_limit;
    return fail(failure_kind::limit_exceeded, "the " + std::string(name_of(*exit_limit)) +
                                                  " limit ended the interpreter" +
                                                  (exit->signal ? " (" + *exit->signal + ")" : ""));
  }
  // A signal of the interpreter's own explains its end better than the channel it closed by dying.
  if (facts.channel_closed && exit && (!exit->signal || exit->killed_on_request)) {
    return fail(failure_kind::channel_closed,
                exit->signal ? "the program's channel closed before it reported a result; the host ended the "
                               "execution at once"
                             : "the program's channel closed before it reported a result (the interpreter "
                               "exited with status " + std::to_string(exit->exit_code) + ")");
  }
  return fail(failure_kind::crashed,
              "the interpreter ended without reporting a result (" + detail::how_it_ended(exit) + ")");
}

}  // namespace psych
