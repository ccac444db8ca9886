// A proxied connection's deadlines (src/host/egress/connection_clock.hpp): a bound that moves
// sooner wakes the watch, one that moves later does not end the connection early, and the idle
// bound counts from the last byte. Timings are generous upper bounds only (the machines are
// shared); lower bounds are exact, since a timer never fires early.
#include <chrono>
#include <functional>
#include <optional>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <doctest/doctest.h>

#include "egress/connection_clock.hpp"

using psych::host::egress::connection_clock;
using psych::host::egress::expiry;
using namespace std::chrono_literals;

namespace {

using steady = std::chrono::steady_clock;

/// A clock watched on its own event loop; `script` runs beside the watch and changes its bounds.
/// Returns the first bound to pass and how long after the start it passed.
template <class Script>
std::pair<expiry, steady::duration> first_expiry(std::chrono::milliseconds idle, std::chrono::milliseconds lifetime,
                                                 Script script) {
  boost::asio::io_context io;
  connection_clock bounds(io.get_executor(), idle, lifetime);
  const auto start = steady::now();
  std::optional<steady::duration> passed_after;
  const std::function<void()> on_expiry = [&] {  // the watch keeps a reference: it lives here
    if (!passed_after) passed_after = steady::now() - start;
    bounds.stop();
  };
  boost::asio::co_spawn(io, bounds.watch(on_expiry), boost::asio::detached);
  boost::asio::co_spawn(io, script(bounds), boost::asio::detached);
  io.run_for(10s);
  REQUIRE(passed_after.has_value());
  return {bounds.expired(), *passed_after};
}

/// The first bound to pass was `expected`, not before `not_before` (a timer never fires early) and
/// well within the run (a generous bound: the machines are shared).
void check_first(const std::pair<expiry, steady::duration>& first, expiry expected, steady::duration not_before) {
  CHECK(first.first == expected);
  CHECK(first.second >= not_before);
  CHECK(first.second < 5s);
}

boost::asio::awaitable<void> let_time_pass(std::chrono::milliseconds span) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, span);
  co_await timer.async_wait(boost::asio::use_awaitable);
}

}  // namespace

TEST_CASE("a step replaced by a sooner one ends at the sooner one") {
  const auto first = first_expiry(1h, 1h, [](connection_clock& bounds) -> boost::asio::awaitable<void> {
    bounds.step(30s);
    co_await let_time_pass(50ms);  // the watch sleeps toward the 30 s
    bounds.step(100ms);
  });
  check_first(first, expiry::step, 150ms);
}

TEST_CASE("a step replaced by a later one does not end at the earlier one") {
  const auto first = first_expiry(1h, 1h, [](connection_clock& bounds) -> boost::asio::awaitable<void> {
    bounds.step(100ms);
    co_await let_time_pass(20ms);  // the watch sleeps toward the 100 ms
    bounds.step(400ms);
  });
  check_first(first, expiry::step, 420ms);
}

TEST_CASE("a step cleared leaves the lifetime") {
  const auto first = first_expiry(1h, 300ms, [](connection_clock& bounds) -> boost::asio::awaitable<void> {
    bounds.step(100ms);
    co_await let_time_pass(20ms);
    bounds.step(std::nullopt);
  });
  check_first(first, expiry::lifetime, 300ms);
}

TEST_CASE("bytes flowing bring in the idle bound, sooner than the step before them") {
  const auto first = first_expiry(200ms, 1h, [](connection_clock& bounds) -> boost::asio::awaitable<void> {
    bounds.step(30s);
    co_await let_time_pass(50ms);
    bounds.step(std::nullopt);
    bounds.flowing();
    for (int i = 0; i < 3; ++i) {  // a byte every 100 ms keeps the connection alive
      co_await let_time_pass(100ms);
      bounds.touch();
    }
  });
  check_first(first, expiry::idle, 550ms);  // 50 ms, three bytes 100 ms apart, then 200 ms of silence
}
