#pragma once
// Admission to the sandbox service's slots: at most max_concurrent executions run at once, up to
// max_queued more wait their turn in order, and beyond them a request is refused busy before
// anything runs. On shutdown nothing new is admitted, the queued are woken to be answered
// shutting_down, the running have drain_seconds before they are cancelled, and the service is
// drained once none is left. The event loop's alone.
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "psych/host/sandbox_service.hpp"
#include "service/service_execution.hpp"
#include "service/service_metrics.hpp"

namespace psych::host {

class admission {
 public:
  /// `on_drained`: called once, on the event loop, when shutting down and nothing is left.
  admission(boost::asio::io_context& io, const sandbox_service_options& options, service_counters& counters,
            std::function<void()> on_drained);

  [[nodiscard]] bool shutting_down() const noexcept { return shutting_down_; }
  /// Whether an execution of this id is queued, running, or among the last 100,000 that ended: an
  /// execution never runs twice.
  [[nodiscard]] bool used(const std::string& id) const;
  /// `client`'s execution `id` while it is queued or running; null for none and for another
  /// client's, which is answered as one that does not exist.
  [[nodiscard]] service_execution* find(const std::string& id, const std::string& client) const;

  /// Takes a slot for `exec` if one is free, or a place in the queue; false when both are full
  /// (nothing is then held).
  bool admit(const std::shared_ptr<service_execution>& exec);
  /// Returns once a queued `exec` has its slot, was cancelled, or the service is shutting down. False
  /// when it got no slot: it has left the queue and is forgotten, and nothing ran.
  boost::asio::awaitable<bool> wait_for_slot(std::shared_ptr<service_execution> exec);
  /// The slot of an execution whose run ended goes to the next one queued.
  void release_slot();
  /// An execution that ended leaves; its id stays used.
  void forget(const std::shared_ptr<service_execution>& exec);

  /// Refuses what comes next and starts the drain (sandbox_service::shutdown()).
  void begin_shutdown();

 private:
  void grant_waiting();
  void count_load();
  void maybe_drained();

  const sandbox_service_options& options_;
  service_counters& counters_;
  std::function<void()> on_drained_;
  std::map<std::string, std::shared_ptr<service_execution>> executions_;
  std::deque<std::shared_ptr<service_execution>> waiting_;
  std::set<std::string> recent_ids_;
  std::deque<std::string> recent_order_;
  std::size_t running_ = 0;
  bool shutting_down_ = false;
  boost::asio::steady_timer drain_deadline_;
  bool drained_ = false;
};

}  // namespace psych::host
