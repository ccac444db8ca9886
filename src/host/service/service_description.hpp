#pragma once
// What the sandbox service's backend says it offers (its describe()): probed at start, every
// describe_refresh_seconds, and on a GET /v1/describe?fresh=1; the last probe's answer is what a
// describe (a health check, most often) is served, and what an execution's terms are checked against.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "psych/host/sandbox.hpp"

namespace psych::host {

class service_description {
 public:
  service_description(boost::asio::io_context& io, sandbox& backend) : io_(io), backend_(backend) {}

  /// Probes the backend on the calling thread.
  void refresh();
  [[nodiscard]] description current() const;
  /// The last probe's answer as JSON, as GET /v1/describe serves it.
  [[nodiscard]] std::string json() const;
  /// Probes now, on a thread of its own; concurrent callers share one probe. The event loop's.
  boost::asio::awaitable<void> probe_now();

  /// Probes again every `seconds` on a thread of its own, until stop_refreshing(); 0: never.
  void start_refreshing(double seconds);
  void stop_refreshing();
  /// Waits for the last fresh probe's thread: it posted its end already once the event loop ran out.
  void join_probe();

 private:
  boost::asio::io_context& io_;
  sandbox& backend_;
  mutable std::mutex mutex_;
  description described_;
  std::string json_;

  std::jthread refresher_;
  std::mutex refresh_mutex_;
  std::condition_variable_any refresh_wake_;

  // The event loop's alone.
  std::thread prober_;
  bool probing_ = false;
  std::vector<std::shared_ptr<boost::asio::steady_timer>> probe_waiters_;
};

}  // namespace psych::host
