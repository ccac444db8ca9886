#include "egress/connection_clock.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace psych::host::egress {

namespace {

/// `from + span`, or the end of time where that would overflow (a caller's "no bound").
connection_clock::clock::time_point later(connection_clock::clock::time_point from, std::chrono::milliseconds span) {
  const auto room =
      std::chrono::duration_cast<std::chrono::milliseconds>(connection_clock::clock::time_point::max() - from);
  return span >= room ? connection_clock::clock::time_point::max() : from + span;
}

}  // namespace

connection_clock::connection_clock(const boost::asio::any_io_executor& executor, std::chrono::milliseconds idle,
                                   std::chrono::milliseconds lifetime)
    : timer_(executor), idle_(idle), end_of_life_(later(clock::now(), lifetime)), last_moved_(clock::now()) {}

void connection_clock::step(std::optional<std::chrono::milliseconds> limit) {
  end_of_step_.reset();
  if (limit) end_of_step_ = later(clock::now(), *limit);
  wake_if_sooner();
}

void connection_clock::flowing() {
  flowing_ = true;
  touch();
  wake_if_sooner();
}

void connection_clock::wake_if_sooner() {
  // The timer's expiry is what the watch sleeps toward (the epoch before its first sleep). A later
  // bound needs no wake: the watch, woken at the old one, finds it not passed and sleeps on toward
  // the new. Waking it for nothing costs a timer update and a turn of the event loop each time, and
  // a connection takes several steps before its first byte.
  if (nearest().first < timer_.expiry()) timer_.cancel();
}

std::pair<connection_clock::clock::time_point, expiry> connection_clock::nearest() const {
  std::pair<clock::time_point, expiry> out{end_of_life_, expiry::lifetime};
  if (end_of_step_ && *end_of_step_ < out.first) out = {*end_of_step_, expiry::step};
  if (const auto idle_end = later(last_moved_, idle_); flowing_ && idle_end < out.first) out = {idle_end, expiry::idle};
  return out;
}

boost::asio::awaitable<void> connection_clock::watch(const std::function<void()>& on_expiry) {
  while (!stopped_) {
    const auto [when, which] = nearest();
    if (clock::now() >= when) {
      // The first bound to pass is the connection's reason; it stays watched for the steps of its
      // end (a refusal's last words), each bound passing at most once.
      if (expired_ == expiry::none) expired_ = which;
      if (which == expiry::step)
        end_of_step_.reset();
      else if (which == expiry::idle)
        flowing_ = false;
      else
        end_of_life_ = clock::time_point::max();
      on_expiry();
      continue;
    }
    timer_.expires_at(when);
    // Woken early by a sooner bound or by stop(): the loop looks again. An idle bound that bytes
    // have moved since, or a step that was replaced by a later one, is slept toward anew.
    co_await timer_.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
  }
}

void connection_clock::stop() {
  stopped_ = true;
  timer_.cancel();
}

}  // namespace psych::host::egress
