#pragma once
// The sandbox service's GET /metrics: its counts (service_stats.hpp) as Prometheus text. Which
// metrics exist, their names, types and labels, are docs/serve.md's "Metrics"; this renders them.
#include <cstddef>
#include <string>

#include "psych/host/service_stats.hpp"

namespace psych {

/// The bounds the service was started with, exposed so that an alert can compare against them.
struct service_capacity {
  std::size_t max_concurrent = 0, max_queued = 0, max_connections = 0;
};

std::string service_metrics_text(const sandbox_service_stats& stats, const service_capacity& capacity);

}  // namespace psych
