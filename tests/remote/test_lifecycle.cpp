// Timeout, cancel and drain across the wire: the service's own wall clock ends a busy loop; a
// caller's stop token ends a run on the service; shutdown() drains, then cancels what still runs.
// Each leaves nothing running and no process of the children's uid.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stop_token>
#include <string>
#include <thread>

#include "psych/host/function_tools.hpp"
#include "psych/host/remote_protocol.hpp"
#include "psych/host/remote_sandbox.hpp"
#include "raw_client.hpp"
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
  CHECK(s->service->stats().executions_finished() == 1);
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

TEST_CASE("lifecycle: while draining, a running program's binding call is answered and it finishes; nothing new runs") {
  // The results of a running execution come on connections of their own, so a draining service
  // still accepts them; a new execution is 503 before it runs, and describe is 503 (a load
  // balancer's health check takes the replica out).
  const auto token = fresh_token();
  auto s = service_or_skip({"alice " + token}, [](psych::sandbox_service_options& o) { o.drain_seconds = 20; });
  if (!s) return;
  std::atomic<int> marks{0};
  psych::function_tool mark;
  mark.name = "mark";
  mark.description = "counts the calls";
  mark.call = [&](const psych::json_text&, std::stop_token) -> psych::tool_answer<psych::json_text> {
    ++marks;
    return psych::json_text{"7"};
  };
  auto tools = psych::function_tools::create({mark}).value();
  const auto client = ready_client(client_options(*s, token));
  auto running = std::async(std::launch::async, [&] {
    return client->run({.program = "import time\ntime.sleep(2)\n(await call_tool('mark', {})) * 6\n",
                        .terms = short_terms(25),
                        .bindings = tools->offered_now(),
                        .invoker = tools.get()});
  });
  REQUIRE(eventually([&] { return s->service->stats().running == 1; }, std::chrono::seconds(10)));
  const auto start = std::chrono::steady_clock::now();
  auto shutdown = std::async(std::launch::async, [&] { s->service->shutdown(); });
  REQUIRE(eventually([&] {
    const auto describe = raw_request(s->service->port(), "GET", "/v1/describe", {{"Authorization", "Bearer " + token}});
    return describe && describe->status == 503;
  }, std::chrono::seconds(5)));
  const auto refused = client->run({.program = "await call_tool('mark', {})\n", .terms = short_terms(5),
                                    .bindings = tools->offered_now(), .invoker = tools.get()});
  REQUIRE(running.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  const auto r = running.get();
  REQUIRE(shutdown.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  const double drained = seconds_since(start);
  MESSAGE("drained in " << drained << " s; the running one: " << (r.failure ? r.failure->message : "ok")
                        << "; the one sent while draining: " << (refused.failure ? refused.failure->message : "ran"));
  CHECK_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
  REQUIRE(r.value);
  CHECK(r.value->text == "42");
  REQUIRE(refused.failure);
  // Sent as the service drains: refused before it ran, by describe or by the execution's 503.
  CHECK((refused.failure->message.find("did not run") != std::string::npos ||
         refused.failure->message.find("nothing was sent") != std::string::npos));
  CHECK(marks == 1);  // the running one's call, and nothing of the refused one
  CHECK(drained < 15);  // it finished on its own, long before the drain deadline
  const auto stats = s->service->stats();
  CHECK(stats.executions_cancelled == 0);
  CHECK(stats.running == 0);
  check_no_children_left();
}

namespace {

/// The body of POST /v1/executions/{id} for `program`, as remote_sandbox would send it.
std::string execution_body(const std::string& program, double wall) {
  return psych::protocol::encode_json(psych::remote::execution_request{
      .version = std::string(psych::remote::protocol_version), .program = program, .terms = short_terms(wall)});
}

}  // namespace

TEST_CASE("lifecycle: a client whose connection closes while its program runs has the execution cancelled") {
  const auto token = fresh_token();
  auto s = service_or_skip({"alice " + token});
  if (!s) return;
  auto c = raw_connection::open(s->service->port(), true);
  REQUIRE(c);
  REQUIRE(c->send_request("POST", "/v1/executions/goes-away-1",
                          {{"Authorization", "Bearer " + token}, {"Content-Type", "application/json"}},
                          execution_body("import time\ntime.sleep(30)\n", 25)));
  REQUIRE(eventually([&] { return s->service->stats().running == 1; }, std::chrono::seconds(10)));
  const auto closed_at = std::chrono::steady_clock::now();
  c.reset();  // the client is gone, its program has 30 s of sleep and 25 s of wall clock left
  CHECK(eventually([&] { return s->service->stats().running == 0; }, std::chrono::seconds(10)));
  const double took = seconds_since(closed_at);
  MESSAGE("the execution of a client that went away ended " << took << " s after its connection closed");
  CHECK(took < 10);
  CHECK(s->service->stats().executions_cancelled == 1);
  check_no_children_left();
}

TEST_CASE("lifecycle: beyond max_concurrent a request waits in the queue; beyond the queue it is 503 before it runs") {
  const auto token = fresh_token();
  auto s = service_or_skip({"alice " + token}, [](psych::sandbox_service_options& o) {
    o.max_concurrent = 1;
    o.max_queued = 1;
  });
  if (!s) return;
  const auto first_client = ready_client(client_options(*s, token));
  const auto second_client = ready_client(client_options(*s, token));
  auto first = std::async(std::launch::async, [&] {
    return first_client->run({.program = "import time\ntime.sleep(2)\n1", .terms = short_terms(20)});
  });
  REQUIRE(eventually([&] { return s->service->stats().running == 1; }, std::chrono::seconds(10)));
  auto second = std::async(std::launch::async, [&] {
    return second_client->run({.program = "2", .terms = short_terms(20)});
  });
  REQUIRE(eventually([&] { return s->service->stats().queued == 1; }, std::chrono::seconds(10)));

  const auto third = raw_request(s->service->port(), "POST", "/v1/executions/over-capacity-1",
                                 {{"Authorization", "Bearer " + token}, {"Content-Type", "application/json"}},
                                 execution_body("3", 20));
  REQUIRE(third);
  CHECK(third->status == 503);
  CHECK(third->retry_after == "1");
  CHECK(third->body.find("\"error\":\"busy\"") != std::string::npos);

  const auto one = first.get();
  const auto two = second.get();
  REQUIRE_MESSAGE(one.ok(), (one.failure ? one.failure->message : ""));
  REQUIRE_MESSAGE(two.ok(), (two.failure ? two.failure->message : ""));
  CHECK(one.value->text == "1");
  CHECK(two.value->text == "2");  // the queued one ran once the slot was free
  const auto stats = s->service->stats();
  CHECK(stats.refused[psych::service_refusal::busy] == 1);
  CHECK(stats.executions_started == 2);  // the third never started
  CHECK(stats.running == 0);
  CHECK(stats.queued == 0);
  check_no_children_left();
}
