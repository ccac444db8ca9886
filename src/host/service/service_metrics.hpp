#pragma once
// The sandbox service's counts (service_stats.hpp), kept as they happen, and its GET /metrics: the
// counts as Prometheus text. Which metrics exist, their names, types and labels, are docs/serve.md's
// "Metrics"; this renders them.
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>

#include "psych/failure.hpp"
#include "psych/host/service_stats.hpp"
#include "psych/limits.hpp"

namespace psych {

/// The bounds the service was started with, exposed so that an alert can compare against them.
struct service_capacity {
  std::size_t max_concurrent = 0, max_queued = 0, max_connections = 0;
};

std::string service_metrics_text(const sandbox_service_stats& stats, const service_capacity& capacity);

/// The counts as they happen: the event loop counts requests and executions while stats() and
/// GET /metrics read them, so each change and each read holds the lock.
class service_counters {
 public:
  template <class F>
  void count(F&& f) {
    std::lock_guard lock(mutex_);
    f(counts_);
  }
  [[nodiscard]] sandbox_service_stats counted() const {
    std::lock_guard lock(mutex_);
    return counts_;
  }
  /// A started execution's end: its outcome, the cap that ended it, how long it held its slot.
  void count_finished(double held_seconds, std::optional<failure_kind> failed, std::optional<limit_name> limit);

 private:
  mutable std::mutex mutex_;
  sandbox_service_stats counts_;
};

}  // namespace psych
