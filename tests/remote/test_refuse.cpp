// Refuse before running, on both sides (docs/remote-protocol.md): a client whose service says it
// cannot meet the terms sends nothing; a service sent terms beyond what it can meet answers a single
// `terms_unmet` error frame and runs nothing; an execution id is never run twice.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "psych/host/function_tools.hpp"
#include "psych/host/remote_protocol.hpp"
#include "psych/host/remote_sandbox.hpp"
#include "raw_client.hpp"
#include "support.hpp"

using namespace remote_test;

namespace {

std::vector<std::string> lines_of(const std::string& body) {
  std::vector<std::string> out;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

/// The error frame that is all of `response`'s stream, REQUIREd to be exactly that.
psych::remote::error_frame only_error_frame(const raw_response& response) {
  const auto frames = lines_of(response.body);
  REQUIRE(frames.size() == 1);
  auto frame = psych::protocol::decode_frame<psych::remote::error_frame>(frames.front());
  REQUIRE(frame);
  return std::get<psych::remote::error_frame>(frame.value());
}

/// The program's side effect: a binding call, counted by the client's tool. (A file would not do:
/// the process backend's Landlock rules keep the child's writes in its own workspace.)
struct marker {
  std::atomic<int> calls{0};
  std::unique_ptr<psych::function_tools> tools;
  marker() {
    psych::function_tool mark;
    mark.name = "mark";
    mark.description = "records that the program ran";
    mark.call = [this](const psych::json_text&, std::stop_token) -> psych::tool_answer<psych::json_text> {
      ++calls;
      return psych::json_text{"true"};
    };
    tools = psych::function_tools::create({mark}).value();
  }
  psych::run_request request(psych::execution_terms terms) {
    return {.program = marks, .terms = terms, .bindings = tools->offered_now(), .invoker = tools.get()};
  }
  static constexpr const char* marks = "await call_tool('mark', {})\n'marked'\n";
};

}  // namespace

TEST_CASE("refuse before running: the client sends nothing to a service that cannot meet the terms") {
  const auto token = fresh_token();
  auto s = service_or_skip({"alice " + token});
  if (!s) return;
  const auto client = made_client(client_options(*s, token));
  const auto d = client->describe();
  REQUIRE(d.ready);
  REQUIRE(d.isolation == psych::isolation_level::process);  // the service runs linux-process

  marker side_effect;
  auto terms = short_terms(10);
  terms.isolation = psych::isolation_level::isolated;
  const auto r = client->run(side_effect.request(terms));
  REQUIRE(r.failure);
  CHECK(r.failure->kind == psych::failure_kind::isolation_unavailable);
  CHECK(r.failure->message.find("nothing was sent") != std::string::npos);

  auto network = short_terms(10);
  network.network = psych::network_access::unrestricted;
  const auto rn = client->run(side_effect.request(network));
  REQUIRE(rn.failure);
  CHECK(rn.failure->message.find("nothing was sent") != std::string::npos);
  CHECK(side_effect.calls == 0);

  // The service logs a request after its response is written, so the client can hold the answer
  // before the line is there: waited for, briefly.
  const auto described = [&] {
    for (const auto& line : s->log->lines())
      if (line.find("/v1/describe") != std::string::npos) return true;
    return false;
  };
  CHECK(eventually(described, std::chrono::seconds(5)));
  for (const auto& line : s->log->lines()) CHECK_MESSAGE(line.find("\"POST\"") == std::string::npos, line);
  CHECK(s->service->stats().executions_started == 0);
}

TEST_CASE("refuse before running: the service answers terms beyond its ceiling with one terms_unmet frame") {
  const auto token = fresh_token();
  auto s = service_or_skip({"alice " + token});
  if (!s) return;
  const auto port = s->service->port();
  const auto client = made_client(client_options(*s, token));
  const auto d = client->describe();
  REQUIRE(d.ready);
  marker side_effect;
  const header_list headers{{"Authorization", "Bearer " + token},
                            {"Content-Type", "application/json"},
                            {"Accept", "application/x-ndjson"}};
  // As a client would send it, the binding offered: had it run, its stream would carry a `call`.
  const auto post = [&](const std::string& id, const psych::execution_terms& terms) {
    const psych::remote::execution_request request{.version = std::string(psych::remote::protocol_version),
                                                   .program = marker::marks,
                                                   .filename = "prog.py",
                                                   .terms = terms,
                                                   .bindings = {{.name = "mark", .description = "", .deferred = false}},
                                                   .tenant = "default"};
    std::string error;
    auto response = raw_request(port, "POST", "/v1/executions/" + id, headers, psych::protocol::encode_json(request), &error);
    REQUIRE_MESSAGE(response, error);
    return *response;
  };

  SUBCASE("limits beyond the ceiling") {
    auto terms = short_terms(10);
    terms.limits.wall_seconds = d.limit_ceiling.wall_seconds.value * 10;
    const auto response = post("beyond-ceiling-1", terms);
    CHECK(response.status == 200);
    CHECK(response.content_type.starts_with("application/x-ndjson"));
    const auto error = only_error_frame(response);
    CHECK(error.code == psych::remote::error_code::terms_unmet);
    CHECK_FALSE(error.refusal);
    CHECK(error.message.find("ceiling") != std::string::npos);
  }
  SUBCASE("isolation beyond the backend's") {
    auto terms = short_terms(10);
    terms.isolation = psych::isolation_level::isolated;
    const auto response = post("beyond-isolation-1", terms);
    CHECK(response.status == 200);
    const auto error = only_error_frame(response);
    CHECK(error.code == psych::remote::error_code::terms_unmet);
    CHECK(error.refusal == psych::refusal_reason::isolation_unreachable);
  }
  // Nothing ran: nothing started (and the single frame above carried no `call`).
  auto stats = s->service->stats();
  CHECK(stats.executions_started == 0);
  CHECK(stats.refused[psych::service_refusal::terms_unmet] == 1);

  // The control: the same program within the terms does make its call, so the absence above means
  // it did not run, not that it could not have.
  auto control = side_effect.request(short_terms(10));
  control.run.execution_id = "control-1";
  const auto r = client->run(control);
  CHECK_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
  CHECK(side_effect.calls == 1);

  // An execution id is never run twice: the same id again is 409, before anything runs.
  const auto again = post("control-1", short_terms(10));
  CHECK(again.status == 409);
  CHECK(again.body.find("\"error\":\"duplicate\"") != std::string::npos);
  CHECK(again.body.find("\"type\":\"call\"") == std::string::npos);
  stats = s->service->stats();
  CHECK(stats.executions_started == 1);
}
