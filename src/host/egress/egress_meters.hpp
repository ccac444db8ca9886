#pragma once
// What one egress proxy has done, counted as it happens on the proxy's thread and read as a snapshot
// from any other: connections allowed, refused and cut short, bytes each way, and the latest
// refusals with their reasons, so a run's report can say what its program was denied.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "egress/proxy_error.hpp"

namespace psych::host {

/// One refused connection: where it asked to go (canonical when its head parsed; of one that did
/// not, its authority alone; empty when it named nothing) and why it was refused.
struct refused_connection {
  std::string host;
  std::uint16_t port = 0;
  proxy_error error = proxy_error::http_request_error;
  std::string detail;
};

struct egress_meters {
  /// Connections that reached their destination: a CONNECT tunnel whose first bytes passed, a plain
  /// request sent on.
  std::uint64_t connections_allowed = 0;
  /// Connections answered with an error (a 503 for want of room included), or closed after a
  /// CONNECT's 200 for their first bytes.
  std::uint64_t connections_refused = 0;
  /// Allowed connections the proxy ended for a bound, by which: no byte either way for idle_timeout,
  /// older than connection_lifetime, connection_bytes moved.
  std::uint64_t cut_idle = 0;
  std::uint64_t cut_lifetime = 0;
  std::uint64_t cut_bytes = 0;
  std::uint64_t bytes_sent = 0;      ///< program to world, as relayed (a plain request's head included)
  std::uint64_t bytes_received = 0;  ///< world to program
  /// The latest refusals, oldest first, at most `kept_refusals`.
  std::vector<refused_connection> latest_refusals;

  static constexpr std::size_t kept_refusals = 32;
};

}  // namespace psych::host

namespace psych::host::egress {

enum class cut_reason { idle, lifetime, bytes };

/// The counting side of egress_meters. Every call is safe from any thread.
class egress_tally {
 public:
  void allowed() noexcept { allowed_.fetch_add(1, std::memory_order_relaxed); }
  void refused(refused_connection refusal);
  void cut(cut_reason why) noexcept;
  void sent(std::uint64_t bytes) noexcept { sent_.fetch_add(bytes, std::memory_order_relaxed); }
  void received(std::uint64_t bytes) noexcept { received_.fetch_add(bytes, std::memory_order_relaxed); }
  [[nodiscard]] egress_meters snapshot() const;

 private:
  std::atomic<std::uint64_t> allowed_{0}, refused_{0}, cut_idle_{0}, cut_lifetime_{0}, cut_bytes_{0}, sent_{0},
      received_{0};
  mutable std::mutex latest_mutex_;
  std::deque<refused_connection> latest_;
};

}  // namespace psych::host::egress
