#pragma once
// The deadlines of one proxied connection: its current step's (a request head, a destination, a
// ClientHello, a refusal's last words), the idle bound once bytes flow, and its lifetime over all.
// When one passes, the connection's expiry runs (it cancels whatever the connection waits on) and
// the connection asks which bound passed first.
#include <chrono>
#include <functional>
#include <optional>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

namespace psych::host::egress {

enum class expiry { none, step, idle, lifetime };

class connection_clock {
 public:
  using clock = std::chrono::steady_clock;

  connection_clock(const boost::asio::any_io_executor& executor, std::chrono::milliseconds idle,
                   std::chrono::milliseconds lifetime);

  /// A step that must end within `limit` from now, replacing the last one's; nullopt: none.
  void step(std::optional<std::chrono::milliseconds> limit);
  /// Bytes flow from now on: the idle bound applies.
  void flowing();
  /// A byte moved, one way or the other.
  void touch() noexcept { last_moved_ = clock::now(); }
  /// The first bound that passed; none while none has.
  [[nodiscard]] expiry expired() const noexcept { return expired_; }

  /// Calls `on_expiry` as each bound passes (each at most once) until stop().
  boost::asio::awaitable<void> watch(const std::function<void()>& on_expiry);
  void stop();

 private:
  /// The nearest bound and when it passes.
  [[nodiscard]] std::pair<clock::time_point, expiry> nearest() const;
  /// Wakes the watch when the nearest bound now passes before the one it sleeps toward.
  void wake_if_sooner();

  boost::asio::steady_timer timer_;
  std::chrono::milliseconds idle_;
  clock::time_point end_of_life_;
  std::optional<clock::time_point> end_of_step_;
  bool flowing_ = false;
  bool stopped_ = false;
  clock::time_point last_moved_;
  expiry expired_ = expiry::none;
};

}  // namespace psych::host::egress
