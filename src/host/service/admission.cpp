#include "service/admission.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include "http/http_link.hpp"

namespace psych::host {

admission::admission(asio::io_context& io, const sandbox_service_options& options, service_counters& counters,
                     std::function<void()> on_drained)
    : options_(options), counters_(counters), on_drained_(std::move(on_drained)), drain_deadline_(io) {}

bool admission::used(const std::string& id) const { return executions_.contains(id) || recent_ids_.contains(id); }

service_execution* admission::find(const std::string& id, const std::string& client) const {
  const auto found = executions_.find(id);
  if (found == executions_.end() || found->second->client != client) return nullptr;
  return found->second.get();
}

bool admission::admit(const std::shared_ptr<service_execution>& exec) {
  if (running_ < options_.max_concurrent) {
    ++running_;
    exec->state = service_execution::phase::granted;
  } else if (waiting_.size() < options_.max_queued) {
    waiting_.push_back(exec);
  } else {
    return false;
  }
  executions_.emplace(exec->id, exec);
  count_load();
  return true;
}

awaitable<bool> admission::wait_for_slot(std::shared_ptr<service_execution> exec) {
  while (exec->state == service_execution::phase::queued && !exec->cancel_requested && !shutting_down_) {
    exec->wake.expires_at(std::chrono::steady_clock::time_point::max());
    co_await exec->wake.async_wait(use_tuple);
  }
  if (exec->state != service_execution::phase::queued) co_return true;
  std::erase(waiting_, exec);
  forget(exec);
  co_return false;
}

void admission::release_slot() {
  --running_;
  grant_waiting();
}

/// Queued executions take the free slots in the order they came; a cancelled one is only woken.
void admission::grant_waiting() {
  while (running_ < options_.max_concurrent && !waiting_.empty()) {
    auto next = waiting_.front();
    waiting_.pop_front();
    if (next->cancel_requested) {
      next->wake.cancel();
      continue;
    }
    ++running_;
    next->state = service_execution::phase::granted;
    next->wake.cancel();
  }
  count_load();
}

void admission::count_load() {
  counters_.count([&](auto& c) {
    c.running = running_;
    c.queued = waiting_.size();
  });
}

void admission::forget(const std::shared_ptr<service_execution>& exec) {
  executions_.erase(exec->id);
  recent_ids_.insert(exec->id);
  recent_order_.push_back(exec->id);
  while (recent_order_.size() > 100'000) {
    recent_ids_.erase(recent_order_.front());
    recent_order_.pop_front();
  }
  if (shutting_down_) maybe_drained();
}

/// Describe is answered 503 from now on (a load balancer's health check takes the replica out),
/// but connections are still accepted: a running execution's results and cancel arrive on
/// connections of their own, and without them a program that calls a binding while the service
/// drains could only wait for the deadline. The listener closes once nothing runs.
void admission::begin_shutdown() {
  shutting_down_ = true;
  for (auto& queued : waiting_) queued->wake.cancel();
  drain_deadline_.expires_after(millis(options_.drain_seconds));
  drain_deadline_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    for (auto& [id, exec] : executions_) {
      exec->cancel_requested = true;
      exec->stop.request_stop();
    }
  });
  maybe_drained();
}

void admission::maybe_drained() {
  if (!executions_.empty() || drained_) return;
  drained_ = true;
  drain_deadline_.cancel();
  on_drained_();
}

}  // namespace psych::host
