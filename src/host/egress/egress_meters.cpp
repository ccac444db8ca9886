#include "egress/egress_meters.hpp"

namespace psych::host::egress {

void egress_tally::refused(refused_connection refusal) {
  std::lock_guard lock(latest_mutex_);  // so a snapshot's count and list agree
  refused_.fetch_add(1, std::memory_order_relaxed);
  latest_.push_back(std::move(refusal));
  if (latest_.size() > egress_meters::kept_refusals) latest_.pop_front();
}

void egress_tally::cut(cut_reason why) noexcept {
  auto& counter = why == cut_reason::idle ? cut_idle_ : why == cut_reason::lifetime ? cut_lifetime_ : cut_bytes_;
  counter.fetch_add(1, std::memory_order_relaxed);
}

egress_meters egress_tally::snapshot() const {
  egress_meters out;
  out.connections_allowed = allowed_.load(std::memory_order_relaxed);
  out.connections_refused = refused_.load(std::memory_order_relaxed);
  out.cut_idle = cut_idle_.load(std::memory_order_relaxed);
  out.cut_lifetime = cut_lifetime_.load(std::memory_order_relaxed);
  out.cut_bytes = cut_bytes_.load(std::memory_order_relaxed);
  out.bytes_sent = sent_.load(std::memory_order_relaxed);
  out.bytes_received = received_.load(std::memory_order_relaxed);
  std::lock_guard lock(latest_mutex_);
  out.latest_refusals.assign(latest_.begin(), latest_.end());
  return out;
}

}  // namespace psych::host::egress
