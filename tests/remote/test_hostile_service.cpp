// remote_sandbox against a service that misbehaves (psych_fake_service, one --mode per case): each
// ends as the protocol says (docs/remote-protocol.md, "Failure semantics"), within a time bound,
// with the execution POSTed exactly once, a cancel posted where the program may be running, and
// this process's memory bounded whatever the service streams.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <source_location>
#include <stop_token>
#include <string>
#include <vector>

#include "psych/host/remote_sandbox.hpp"
#include "rss.hpp"
#include "support.hpp"

using namespace remote_test;
using psych::failure_kind;

namespace {

constexpr double client_wall_seconds = 3;
constexpr double bound_seconds = 15;

struct hostile_case {
  const char* mode;
  failure_kind kind;
  /// Words the failure's message must contain (each of them).
  std::vector<std::string> reason;
  int executions_posted = 1;
  /// Whether the program may be running when the client gives up: then exactly one cancel.
  bool cancel = false;
  /// The least time the case may take (a wall clock that must have run out).
  double at_least_seconds = 0;
  /// The most it may take.
  double at_most_seconds = bound_seconds;
};

constexpr long memory_bound_kib = 64 * 1024;
/// The client's connect_timeout_seconds against a fake that may hang (the budget of describe's
/// attempts): under client_options' 2 s, so that describe stays well inside bound_seconds.
constexpr double hang_connect_seconds = 1;

/// psych_fake_service in one mode, REQUIREd to have started, and a client of it (with any token:
/// the fake checks none). Without connect_timeout_seconds the client keeps client_options' own.
struct fake_and_client {
  fake_service fake;
  std::unique_ptr<psych::sandbox> client;

  fake_and_client(const std::string& mode, const certificate& tls, std::optional<double> connect_timeout_seconds)
      : fake(mode, tls) {
    REQUIRE_MESSAGE(fake.started(), "psych_fake_service --mode " << mode << " did not start");
    auto options = client_options(fake.url(), fresh_token(), tls);
    if (connect_timeout_seconds) options.connect_timeout_seconds = *connect_timeout_seconds;
    client = made_client(options);
  }
};

/// A fake_and_client (on the heap: a fake_service does not move); null, with the case reported as
/// skipped (at `where`), when there is no test certificate here.
std::unique_ptr<fake_and_client> fake_or_skip(const std::string& mode,
                                              std::optional<double> connect_timeout_seconds = std::nullopt,
                                              std::source_location where = std::source_location::current()) {
  const auto* tls = certificate_or_skip(where);
  if (!tls) return nullptr;
  return std::make_unique<fake_and_client>(mode, *tls, connect_timeout_seconds);
}

void against(const hostile_case& c) {
  const auto under_test = fake_or_skip(c.mode, hang_connect_seconds);
  if (!under_test) return;
  auto& fake = under_test->fake;
  auto& sandbox = *under_test->client;

  reset_peak();
  const auto before = read_memory();
  const auto start = std::chrono::steady_clock::now();
  const auto r = sandbox.run({.program = "print('hi')\n6*7", .terms = short_terms(client_wall_seconds)});
  const double took = seconds_since(start);
  const auto after = read_memory();
  const long growth = after.peak_kib - before.rss_kib;
  const auto counts = fake.counts();
  const std::string message = r.failure ? r.failure->message : std::string("(no failure)");
  MESSAGE("mode " << std::string(c.mode) << ": " << took << " s, peak RSS +" << growth << " KiB (before " << before.rss_kib
                  << " KiB); describe " << counts.describe << ", execute " << counts.execute << ", cancel "
                  << counts.cancel << "; " << message);

  REQUIRE(r.failure);
  CHECK_MESSAGE(r.failure->kind == c.kind, "got " << psych::name_of(r.failure->kind) << ": " << message);
  for (const auto& word : c.reason) CHECK_MESSAGE(message.find(word) != std::string::npos, "no '" << word << "' in: " << message);
  if (c.kind == failure_kind::timeout) CHECK(r.limit_hit == psych::limit_name::wall_seconds);
  CHECK(took < c.at_most_seconds);
  CHECK(took >= c.at_least_seconds);
  CHECK(counts.execute == c.executions_posted);  // never re-sent
  if (c.cancel) CHECK(counts.cancel == 1);
  CHECK(counts.cancel <= 1);
  CHECK(counts.other == 0);
  if (psych::testing::rss_is_meaningful) CHECK(growth < memory_bound_kib);
  CHECK_MESSAGE(fake.stop(), "the fake service died on its own");
}

}  // namespace

TEST_CASE("hostile service: a valid stream is a result (the fake service's control case)") {
  const auto under_test = fake_or_skip("valid");
  if (!under_test) return;
  auto& fake = under_test->fake;
  const auto r = under_test->client->run({.program = "print('hi')\n6*7", .terms = short_terms(client_wall_seconds)});
  CHECK_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
  REQUIRE(r.value);
  CHECK(r.value->text == "42");
  CHECK(r.stdout_data == "hi\n");
  CHECK(r.isolation == psych::isolation_level::isolated);
  const auto counts = fake.counts();
  CHECK(counts.describe == 1);
  CHECK(counts.execute == 1);
  CHECK(counts.cancel == 0);
  CHECK(fake.stop());
}

TEST_CASE("hostile service: one line that never ends") {
  against({"endless_line", failure_kind::provider_error, {"frame exceeds"}, 1, true});
}
TEST_CASE("hostile service: millions of empty lines") {
  against({"empty_lines", failure_kind::provider_error, {"empty lines"}, 1, true});
}
TEST_CASE("hostile service: one byte a second runs into the wall clock") {
  against({"slow", failure_kind::timeout, {"wall clock", "cancel"}, 1, true, client_wall_seconds + 1});
}
TEST_CASE("hostile service: HTTP 500") {
  against({"status_500", failure_kind::provider_error, {"HTTP 500"}});
}
TEST_CASE("hostile service: a redirect is not followed") {
  against({"redirect_302", failure_kind::provider_error, {"HTTP 302"}});
}
TEST_CASE("hostile service: 200 with text/html") {
  against({"html_200", failure_kind::provider_error, {"text/html"}});
}
TEST_CASE("hostile service: the connection closes in the middle of a frame") {
  against({"close_mid_frame", failure_kind::provider_error, {"the service's stream"}, 1, true});
}
TEST_CASE("hostile service: frames after done") {
  against({"frames_after_done", failure_kind::provider_error, {"after its last"}});
}
TEST_CASE("hostile service: done before accepted") {
  against({"done_before_accepted", failure_kind::provider_error, {"accepted"}});
}
TEST_CASE("hostile service: a response header of a megabyte") {
  against({"huge_header", failure_kind::provider_error, {"header"}});
}
TEST_CASE("hostile service: a stream for another execution") {
  // The service said it accepted something: ours may be running under it, so a cancel goes too.
  against({"wrong_execution_id", failure_kind::provider_error, {"another execution"}, 1, true});
}
TEST_CASE("hostile service: an error code this client does not have is a provider_error naming it") {
  against({"unknown_error_code", failure_kind::provider_error,
           {"did not run the program (quota_exceeded): the tenant's quota is spent"}});
}
TEST_CASE("hostile service: describe never answered -> not ready, nothing sent") {
  against({"describe_hang", failure_kind::launch_failed, {"not ready", "nothing was sent"}, 0, false});
}
TEST_CASE("hostile service: accepted, then silence -> the client's wall clock, and a cancel") {
  against({"accepted_then_silent", failure_kind::timeout, {"wall clock", "cancel"}, 1, true, client_wall_seconds + 1});
}

TEST_CASE("hostile service: results answered 404 while the stream is open -> provider_error, not the wall clock") {
  // A replica that does not run the execution got its results: the client says so within its
  // cancel grace (1 s), instead of leaving the program waiting for the answer.
  against({"results_unknown", failure_kind::provider_error, {"404", "other than the one running it"}, 1, true, 0,
           client_wall_seconds});
}

TEST_CASE("hostile service: describe_hang's describe() itself is bounded and says not ready") {
  const auto under_test = fake_or_skip("describe_hang", hang_connect_seconds);
  if (!under_test) return;
  auto& fake = under_test->fake;
  const auto start = std::chrono::steady_clock::now();
  const auto d = under_test->client->describe();
  const double took = seconds_since(start);
  MESSAGE("describe() against a service that never answers: " << took << " s");
  CHECK_FALSE(d.ready);
  REQUIRE_FALSE(d.problems.empty());
  CHECK(d.problems.front().find("connect budget") != std::string::npos);
  CHECK(fake.counts().describe == 1);  // the silent attempt used the whole budget: no retry
  CHECK(took < bound_seconds);
  CHECK(fake.stop());
}

TEST_CASE("remote_sandbox: a stop requested before the connection is up sends no program") {
  const auto under_test = fake_or_skip("valid");
  if (!under_test) return;
  auto& fake = under_test->fake;
  auto& client = *under_test->client;
  REQUIRE(client.describe().ready);
  std::stop_source stop;
  stop.request_stop();
  const auto r = client.run({.program = "print('hi')\n6*7", .terms = short_terms(client_wall_seconds)}, stop.get_token());
  REQUIRE(r.failure);
  CHECK(r.failure->kind == failure_kind::cancelled);
  CHECK(r.cancelled);
  CHECK_FALSE(r.value);
  CHECK(fake.counts().execute == 0);
  CHECK(fake.stop());
}
