// Timeout, cancel and drain across the wire: the service's own wall clock ends a busy loop; a
// caller's stop token ends a run on the service; shutdown() drains, then cancels what still runs.
// Each leaves nothing running and no process of the children's uid.
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <stop_token>
#include <string>
#include <thread>

#include "psych/host/remote_sandbox.hpp"
#include "support.hpp"

using namespace remote_test;

TEST_CASE("lifecycle: the service's own wall clock ends a busy loop (timeout)") {
  const auto token = fresh_token();
  auto s = service_or_skip({"alice " + token});
  if (!s) return;
  auto options = client_options(*s, token);
  options.wall_clock_slack_seconds = 10;  // the service's clock must be the one that fires
  const auto client = ready_client(options);
  const auto start = std::chrono::steady_clock::now();
  const auto r = client->run({.program = "while True: pass\n", .terms = short_terms(2)});
  const double took = seconds_since(start);
  MESSAGE("while True with wall_seconds 2: " << took << " s; " << (r.failure ? r.failure->message : "no failure"));
  REQUIRE(r.failure);
  CHECK(r.failure->kind == psych::failure_kind::timeout);
  CHECK(r.limit_hit == psych::limit_name::wall_seconds);
  CHECK(r.failure->message.find("slack") == std::string::npos);  // not the client's own clock
  CHECK(took >= 2);
  CHECK(took < 15);
  CHECK(r.isolation == psych::isolation_level::process);
  CHECK(eventually([&] { return s->service->stats().running == 0; }, std::chrono::seconds(5)));
  CHECK(s->service->stats().executions_finished == 1);
  check_no_children_left();
}

TEST_CASE("lifecycle: a caller's stop token cancels the execution on the service") {
  const auto token = fresh_token();
  auto s = service_or_skip({"alice " + token});
  if (!s) return;
  const auto client = ready_client(client_options(*s, token));
  std::stop_source stop;
  std::jthread stopper([&] {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    stop.request_stop();
  });
  const auto start = std::chrono::steady_clock::now();
  const auto r = client->run(
      {.program = "import time\nprint('started', flush=True)\ntime.sleep(30)\n", .terms = short_terms(20)},
      stop.get_token());
  const double took = seconds_since(start);
  MESSAGE("stop after 1 s: " << took << " s; " << (r.failure ? r.failure->message : "no failure"));
  REQUIRE(r.failure);
  CHECK(r.failure->kind == psych::failure_kind::cancelled);
  CHECK(r.cancelled);
  CHECK(took < 15);
  CHECK(eventually([&] { return s->service->stats().running == 0; }, std::chrono::seconds(5)));
  const auto stats = s->service->stats();
  CHECK(stats.executions_cancelled >= 1);
  CHECK(stats.running == 0);
  CHECK(stats.queued == 0);
  check_no_children_left();
}

TEST_CASE("lifecycle: shutdown() drains, then cancels what still runs") {
  const auto token = fresh_token();
  auto s = service_or_skip({"alice " + token}, [](psych::sandbox_service_options& o) { o.drain_seconds = 1; });
  if (!s) return;
  const auto client = ready_client(client_options(*s, token));
  auto running = std::async(std::launch::async, [&] {
    return client->run({.program = "import time\ntime.sleep(30)\n", .terms = short_terms(25)});
  });
  REQUIRE(eventually([&] { return s->service->stats().running == 1; }, std::chrono::seconds(10)));
  const auto start = std::chrono::steady_clock::now();
  s->service->shutdown();
  const double shutdown_took = seconds_since(start);
  REQUIRE(running.wait_for(std::chrono::seconds(15)) == std::future_status::ready);
  const auto r = running.get();
  MESSAGE("shutdown with drain_seconds 1: " << shutdown_took << " s; the client's result: "
                                            << (r.failure ? r.failure->message : "no failure"));
  CHECK(shutdown_took >= 0.9);
  CHECK(shutdown_took < 15);
  REQUIRE(r.failure);
  CHECK(r.failure->kind == psych::failure_kind::cancelled);
  CHECK(r.cancelled);
  const auto stats = s->service->stats();
  CHECK(stats.running == 0);
  CHECK(stats.queued == 0);
  CHECK(stats.executions_cancelled == 1);
  check_no_children_left();
  // It no longer listens.
  auto options = client_options(*s, token);
  options.describe_attempts = 1;
  auto after = psych::remote_sandbox(options);
  REQUIRE(after);
  CHECK_FALSE(after.value()->describe().ready);
}
