#include "service/service_metrics.hpp"

#include <cstdint>
#include <string_view>

#include "service/prometheus_text.hpp"

namespace psych {
namespace {

using prometheus::metric_type;

/// One sample per value of the enum, zeros included: a series that exists from the start lets
/// rate() see its first increase.
template <named_enum E>
void per_value(prometheus::text_writer& out, std::string_view label, const count_by<E>& counts) {
  for (std::size_t i = 0; i < counts.size; ++i)
    out.sample(counts.counts[i], {{label, enum_names<E>::spellings[i]}});
}

void gauge(prometheus::text_writer& out, std::string_view name, std::string_view help, std::uint64_t value) {
  out.family(name, metric_type::gauge, help);
  out.sample(value);
}

}  // namespace

std::string service_metrics_text(const sandbox_service_stats& stats, const service_capacity& capacity) {
  prometheus::text_writer out;
  out.family("psych_executions_started_total", metric_type::counter,
             "Executions granted a slot: the backend was asked to run them.");
  out.sample(stats.executions_started);

  out.family("psych_executions_finished_total", metric_type::counter,
             "Executions whose backend answered, by outcome: ok, or the failure kind of their result.");
  out.sample(stats.finished_ok, {{"outcome", "ok"}});
  per_value(out, "outcome", stats.finished_failed);

  out.family("psych_executions_cancelled_in_queue_total", metric_type::counter,
             "Executions cancelled by their client while queued: they never started.");
  out.sample(stats.cancelled_in_queue);

  out.family("psych_limit_hits_total", metric_type::counter,
             "Finished executions that a limit ended, by the limit.");
  per_value(out, "limit", stats.limit_hits);

  out.family("psych_requests_refused_total", metric_type::counter,
             "Requests answered with an error instead of being done, by reason.");
  per_value(out, "reason", stats.refused);

  out.family("psych_execution_duration_seconds", metric_type::histogram,
             "How long finished executions held their slot, from the grant to the backend's answer.");
  out.histogram(duration_histogram::upper_bounds, stats.durations.counts, stats.durations.count,
                stats.durations.sum_seconds);

  gauge(out, "psych_executions_running", "Executions holding a slot now.", stats.running);
  gauge(out, "psych_executions_queued", "Executions waiting for a slot now.", stats.queued);
  gauge(out, "psych_connections_open", "Client connections open now.", stats.connections);
  gauge(out, "psych_executions_max_running", "Slots: executions that may run at once (--max-concurrent).",
        capacity.max_concurrent);
  gauge(out, "psych_executions_max_queued", "Executions that may wait for a slot (--max-queued).",
        capacity.max_queued);
  gauge(out, "psych_connections_max", "Connections the service keeps open at most.", capacity.max_connections);

  out.family("psych_service_start_time_seconds", metric_type::gauge,
             "When the service started, in seconds since the Unix epoch.");
  out.sample(stats.start_time_seconds);
  return std::move(out).take();
}

void service_counters::count_finished(double held_seconds, std::optional<failure_kind> failed,
                                      std::optional<limit_name> limit) {
  count([&](auto& c) {
    if (failed) ++c.finished_failed[*failed];
    else ++c.finished_ok;
    if (limit) ++c.limit_hits[*limit];
    c.durations.observe(held_seconds);
  });
}

}  // namespace psych
