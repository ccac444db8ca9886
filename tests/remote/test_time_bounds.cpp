// Time bounds a caller can trust (docs/remote-protocol.md, "Time bounds"; docs/cli.md): whatever
// the other side does, an execution ends by its wall clock plus the client's grace, describing a
// service ends within the connect budget, and so does an MCP server's start-up. Each case runs a
// peer that does exactly the hostile thing, through the library with its default options and
// through the command line. The bounds carry generous margins for a noisy machine; each is still
// far below what a client that resets a timer per read, or retries a silent peer, would take.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "psych/host/remote_sandbox.hpp"
#include "support.hpp"

using namespace remote_test;
using psych::failure_kind;

namespace {

constexpr double wall_seconds = 3;
/// What a noisy machine may add to a bound: process start-up, TLS, scheduling.
constexpr double margin_seconds = 3;
const psych::remote_sandbox_options library_defaults{};
constexpr double default_grace_seconds = 2;

/// A client of `fake` with the library's own time options, not the tuned ones of client_options().
std::unique_ptr<psych::sandbox> client_with_defaults(const fake_service& fake, const certificate& tls,
                                                     double connect_seconds = library_defaults.connect_timeout_seconds) {
  auto options = client_options(fake.url(), fresh_token(), tls);
  options.connect_timeout_seconds = connect_seconds;
  options.wall_clock_slack_seconds = library_defaults.wall_clock_slack_seconds;
  options.cancel_grace_seconds = library_defaults.cancel_grace_seconds;
  return made_client(options);
}

/// `psych ARGS...` against `fake` (--remote and its TLS options), bounded at 60 s.
process_output psych_remote(const fake_service& fake, const certificate& tls, std::vector<std::string> args) {
  std::vector<std::string> argv{PSYCH_CLI};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--remote", fake.url(), "--ca", tls.cert, "--token-command", "echo " + fresh_token()});
  return run_process(argv, std::chrono::seconds(60));
}

}  // namespace

TEST_CASE("time bounds: the library's grace is at most 2 s") {
  CHECK(library_defaults.wall_clock_slack_seconds + library_defaults.cancel_grace_seconds <= default_grace_seconds);
}

TEST_CASE("time bounds: a service that drips a byte a second and never answers the cancel") {
  const auto* tls = certificate_or_skip();
  if (!tls) return;
  fake_service fake("drip", *tls);
  REQUIRE(fake.started());
  const double bound = wall_seconds + default_grace_seconds + margin_seconds;

  SUBCASE("through the library, with its defaults") {
    auto client = client_with_defaults(fake, *tls);
    REQUIRE(client->describe().ready);
    const auto start = std::chrono::steady_clock::now();
    const auto r = client->run({.program = "6*7", .terms = short_terms(wall_seconds)});
    const double took = seconds_since(start);
    MESSAGE("run() against a dripping service: " << took << " s; "
                                                 << (r.failure ? r.failure->message : std::string("no failure")));
    REQUIRE(r.failure);
    CHECK(r.failure->kind == failure_kind::timeout);
    CHECK(r.limit_hit == psych::limit_name::wall_seconds);
    CHECK(took >= wall_seconds);
    CHECK(took < bound);
    CHECK(fake.counts().cancel == 1);
  }
  SUBCASE("through psych run --remote") {
    temp_dir dir{"psych-time-bounds"};
    write_file(dir.file("prog.py"), "6*7\n");
    const auto start = std::chrono::steady_clock::now();
    const auto ran = psych_remote(fake, *tls, {"run", "--wall-seconds", "3", dir.file("prog.py")});
    const double took = seconds_since(start);
    MESSAGE("psych run --remote --wall-seconds 3 against a dripping service: " << took << " s\n" << ran.output);
    CHECK_FALSE(ran.timed_out);
    CHECK(ran.exit_code == 1);
    CHECK(ran.output.find("timeout") != std::string::npos);
    CHECK(took < bound);
  }
  CHECK(fake.counts().execute == 1);
  CHECK(fake.stop());
}

TEST_CASE("time bounds: a service whose describe never answers costs the connect budget once") {
  const auto* tls = certificate_or_skip();
  if (!tls) return;
  fake_service fake("describe_hang", *tls);
  REQUIRE(fake.started());
  constexpr double budget = 2;

  SUBCASE("describe() through the library") {
    auto client = client_with_defaults(fake, *tls, budget);
    const auto start = std::chrono::steady_clock::now();
    const auto d = client->describe();
    const double took = seconds_since(start);
    MESSAGE("describe() with a budget of " << budget << " s: " << took << " s");
    CHECK_FALSE(d.ready);
    REQUIRE_FALSE(d.problems.empty());
    CHECK(d.problems.front().find("within the connect budget of 2 s (1 attempt)") != std::string::npos);
    CHECK(took >= budget - 0.1);
    CHECK(took < budget + margin_seconds / 2);
    CHECK(fake.counts().describe == 1);  // the silent attempt used the budget up: no retry
  }
  SUBCASE("psych run --remote --connect-seconds refuses within it, nothing sent") {
    temp_dir dir{"psych-time-bounds"};
    write_file(dir.file("prog.py"), "6*7\n");
    const auto start = std::chrono::steady_clock::now();
    const auto ran = psych_remote(fake, *tls, {"run", "--wall-seconds", "8", "--connect-seconds", "2", dir.file("prog.py")});
    const double took = seconds_since(start);
    MESSAGE("psych run --remote --connect-seconds 2 against a silent describe: " << took << " s\n" << ran.output);
    CHECK(ran.exit_code == 3);  // refused: the service is not ready
    CHECK(ran.output.find("within the connect budget of 2 s") != std::string::npos);
    CHECK(took < budget + margin_seconds);
    CHECK(fake.counts().execute == 0);
  }
  SUBCASE("psych describe --remote --connect-seconds") {
    const auto start = std::chrono::steady_clock::now();
    const auto ran = psych_remote(fake, *tls, {"describe", "--connect-seconds", "2"});
    const double took = seconds_since(start);
    MESSAGE("psych describe --remote --connect-seconds 2 against a silent describe: " << took << " s\n" << ran.output);
    CHECK(ran.exit_code == 1);  // not ready
    CHECK(ran.output.find("within the connect budget of 2 s") != std::string::npos);
    CHECK(took < budget + margin_seconds);
  }
  CHECK(fake.stop());
}

TEST_CASE("time bounds: describe's retries fit inside the connect budget") {
  // Nothing listens on the port of a fake that was stopped: each attempt fails at once, and the
  // backoff (0.2 s, then 0.4 s) is slept only while the budget lasts.
  const auto* tls = certificate_or_skip();
  if (!tls) return;
  fake_service fake("valid", *tls);
  REQUIRE(fake.started());
  const std::string url = fake.url();
  REQUIRE(fake.stop());
  const auto attempts_within = [&](double budget) {
    auto options = client_options(url, fresh_token(), *tls);
    options.connect_timeout_seconds = budget;
    auto client = made_client(options);
    const auto start = std::chrono::steady_clock::now();
    const auto d = client->describe();
    const double took = seconds_since(start);
    MESSAGE("describe() of a closed port with a budget of " << budget << " s: " << took << " s: "
                                                             << (d.problems.empty() ? "" : d.problems.front()));
    CHECK_FALSE(d.ready);
    CHECK(took < budget + margin_seconds / 2);
    REQUIRE_FALSE(d.problems.empty());
    return d.problems.front();
  };
  CHECK(attempts_within(0.3).find("(2 attempts)") != std::string::npos);
  CHECK(attempts_within(10).find("(3 attempts)") != std::string::npos);
}

TEST_CASE("time bounds: an MCP server that hangs at start costs psych run --connect-seconds") {
  temp_dir dir{"psych-time-bounds"};
  write_file(dir.file("prog.py"), "6*7\n");
  // Started, then silent: it never answers initialize and ignores its stdin closing.
  write_file(dir.file("hang"), "#!/bin/sh\nexec sleep 60\n", 0700);
  const auto start = std::chrono::steady_clock::now();
  const auto ran = run_process({PSYCH_CLI, "run", "--connect-seconds", "1", "--mcp", "hang=" + dir.file("hang"),
                                dir.file("prog.py")},
                               std::chrono::seconds(60));
  const double took = seconds_since(start);
  MESSAGE("psych run --connect-seconds 1 with a hanging MCP server: " << took << " s\n" << ran.output);
  CHECK(ran.exit_code == 2);
  CHECK(ran.output.find("--mcp hang") != std::string::npos);
  CHECK(ran.output.find("initialize") != std::string::npos);
  // The budget, then the server's stop (its stdin closed, 1 s, SIGTERM).
  CHECK(took < 1 + 2 + margin_seconds);
}
