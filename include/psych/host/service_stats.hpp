#pragma once
// What the sandbox service counts: the one record its tests read (sandbox_service::stats()) and its
// GET /metrics renders. Every breakdown is by a closed enum, so what an operator scrapes has a fixed
// set of series, and nothing a client sent (a token, a tenant, an id, a program) can become a label.
#include <array>
#include <cstddef>
#include <cstdint>

#include "psych/failure.hpp"
#include "psych/limits.hpp"
#include "psych/names.hpp"

namespace psych {

/// Why the service answered a request with an error instead of doing what it asked. Each is the
/// `error` code the answer carries (docs/remote-protocol.md), except too_large, whose code on the
/// wire is `bad_request`: told apart here because an operator tunes the limits by it.
enum class service_refusal {
  /// 401: no credential, or one the token file does not hold.
  unauthorized,
  /// 400 or 405: a malformed request, a body where none belongs, another protocol version,
  /// invalid limits, the wrong method.
  bad_request,
  /// 413 or 431: a body or a header beyond the service's bounds.
  too_large,
  /// 404: a route the protocol does not have, or results or a cancel for an execution that is not
  /// running (or is another credential's).
  not_found,
  /// 409: an execution id the service has already seen.
  duplicate,
  /// An `error` frame terms_unmet: its backend cannot meet the terms; nothing ran.
  terms_unmet,
  /// 503 with Retry-After: every slot and the queue are full; nothing ran.
  busy,
  /// 503, or an `error` frame for an execution that was queued: the service is draining.
  shutting_down,
};
PSYCH_ENUM_NAMES(service_refusal, "unauthorized", "bad_request", "too_large", "not_found", "duplicate",
                 "terms_unmet", "busy", "shutting_down");

/// A count per value of a closed enum.
template <named_enum E>
struct count_by {
  static constexpr std::size_t size = enum_names<E>::spellings.size();
  std::array<std::uint64_t, size> counts{};
  std::uint64_t& operator[](E value) { return counts.at(static_cast<std::size_t>(value)); }
  std::uint64_t operator[](E value) const { return counts.at(static_cast<std::size_t>(value)); }
};

/// How long executions held their slot, in seconds, from the grant to the backend's answer.
struct duration_histogram {
  /// Upper bounds, each inclusive: 10 ms (a value) to 5 min (a long wall clock).
  static constexpr std::array<double, 14> upper_bounds{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                                       2.5,  5,     10,   30,  60,   120, 300};
  /// Per bucket, not cumulative: counts[i] holds those in (upper_bounds[i-1], upper_bounds[i]].
  /// One above the last bound is in `count` alone.
  std::array<std::uint64_t, upper_bounds.size()> counts{};
  std::uint64_t count = 0;
  double sum_seconds = 0;

  void observe(double seconds) {
    for (std::size_t i = 0; i < upper_bounds.size(); ++i)
      if (seconds <= upper_bounds[i]) {
        ++counts[i];
        break;
      }
    ++count;
    sum_seconds += seconds;
  }
};

/// What the service has done since it started, and what it holds now.
struct sandbox_service_stats {
  /// Granted a slot. Each started execution finishes once: started == finished() + running.
  std::uint64_t executions_started = 0;
  /// Finished without a failure, and with one by its kind (the result's `failure.kind`).
  std::uint64_t finished_ok = 0;
  count_by<failure_kind> finished_failed;
  /// Ended by a cancel, or by their client going away, whatever their outcome says.
  std::uint64_t executions_cancelled = 0;
  /// Cancelled by their client while queued: never started, nothing ran.
  std::uint64_t cancelled_in_queue = 0;
  /// The cap that ended an execution (the result's limit_hit), counted when the execution finishes.
  count_by<limit_name> limit_hits;
  count_by<service_refusal> refused;
  duration_histogram durations;  ///< one per finished execution
  std::uint64_t running = 0;
  std::uint64_t queued = 0;
  std::uint64_t connections = 0;  ///< open now
  double start_time_seconds = 0;  ///< when the service started, in seconds since the Unix epoch

  [[nodiscard]] std::uint64_t executions_finished() const {
    std::uint64_t total = finished_ok;
    for (const auto n : finished_failed.counts) total += n;
    return total;
  }
};

}  // namespace psych
