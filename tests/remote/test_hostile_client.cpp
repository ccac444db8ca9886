// sandbox_service against clients that misbehave: an endless body, a slowloris header, a thousand
// idle connections, credentials that are wrong in every way, and a cancel of somebody else's
// execution. After each: nothing running or queued, no child process of the children's uid left.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "psych/host/remote_sandbox.hpp"
#include "raw_client.hpp"
#include "rss.hpp"
#include "skip.hpp"
#include "support.hpp"

using namespace remote_test;

namespace {

constexpr std::string_view unauthorized_body = R"({"error":"unauthorized","message":"unauthorized"})";

/// Nothing running or queued, and no process of the children's uid alive.
void check_nothing_left(const psych::sandbox_service& service) {
  CHECK(eventually([&] { return service.stats().running == 0 && service.stats().queued == 0; },
                   std::chrono::seconds(5)));
  check_no_children_left();
}

header_list bearer(const std::string& token) { return {{"Authorization", "Bearer " + token}}; }

bool describe_answers(std::uint16_t port, const std::string& token) {
  std::string why;
  const auto response = raw_request(port, "GET", "/v1/describe", bearer(token), {}, &why);
  if (!response) MESSAGE("describe after the attack: " << why);
  return response && response->status == 200 && response->body.find("\"ready\":true") != std::string::npos;
}

/// A TLS connection to the service, REQUIREd to open.
std::unique_ptr<raw_connection> connection_to(const service_under_test& s) {
  auto c = raw_connection::open(s.service->port(), true);
  REQUIRE(c);
  return c;
}

/// How far sending a request a byte at a time got before the service closed the connection.
struct trickled {
  std::size_t sent = 0;  ///< bytes written before the connection closed
  bool closed = false;   ///< false: every byte went out (or 30 s passed) and it was still open
  double seconds = 0;
};

/// Writes `bytes` one at a time, each followed by half a second's wait for the service to close the
/// connection: slower than request_timeout_seconds lets a request take, so a service that enforces it
/// closes the connection before the last byte. MESSAGEs how far it got, headed `what`.
trickled trickle(raw_connection& c, std::string_view bytes, std::string_view what) {
  trickled out;
  const auto start = std::chrono::steady_clock::now();
  while (!out.closed && out.sent < bytes.size() && seconds_since(start) < 30) {
    if (!c.send(bytes.substr(out.sent, 1), 2)) {
      out.closed = true;  // the write failed: the service has hung up
    } else {
      ++out.sent;
      out.closed = c.closed_within(0.5);
    }
  }
  out.seconds = seconds_since(start);
  MESSAGE(what << ": closed=" << out.closed << " after " << out.sent << " of " << bytes.size() << " bytes, "
               << out.seconds << " s");
  return out;
}

/// `count` plain TCP connections to 127.0.0.1:port that send nothing (no TLS handshake either),
/// REQUIREd to connect; their descriptors.
std::vector<int> idle_connections(std::uint16_t port, int count) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::vector<int> sockets;
  for (int i = 0; i < count; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0);
    sockets.push_back(fd);
  }
  return sockets;
}

/// Whether the service has closed its end of `fd`: readable now, and nothing (or an error) to read.
bool closed_by_service(int fd) {
  pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
  char c;
  return ::poll(&p, 1, 0) == 1 && ::recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

}  // namespace

TEST_CASE("hostile client: an endless body is cut off, and the service still answers") {
  const auto token = fresh_token();
  auto s = service_or_skip({"alice " + token});
  if (!s) return;
  const auto port = s->service->port();

  SUBCASE("a Content-Length of a gibibyte: 413 before the body is read") {
    const auto c = connection_to(*s);
    const auto start = std::chrono::steady_clock::now();
    REQUIRE(c->send("POST /v1/executions/endless-1 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token +
                    "\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n{\"version\":"));
    std::string why;
    const auto response = c->read_response(10, &why);
    const double took = seconds_since(start);
    MESSAGE("a 1 GiB Content-Length: answered in " << took << " s");
    REQUIRE_MESSAGE(response, why);
    CHECK(response->status == 413);
    CHECK(took < 15);
  }
  SUBCASE("a chunked body that never ends: 413 or closed, within the bound") {
    const auto c = connection_to(*s);
    reset_peak();
    const auto before = read_memory();
    const auto start = std::chrono::steady_clock::now();
    REQUIRE(c->send("POST /v1/executions/endless-2 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token +
                    "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"));
    const std::string piece = "10000\r\n" + std::string(0x10000, 'x') + "\r\n";
    std::uint64_t sent = 0;
    while (seconds_since(start) < 20 && c->send(piece, 5)) sent += 0x10000;
    const double took = seconds_since(start);
    std::string why;
    const auto response = c->read_response(5, &why);
    const auto after = read_memory();
    MESSAGE("an endless chunked body: stopped after " << sent / (1024 * 1024) << " MiB in " << took << " s; "
                                                      << (response ? "HTTP " + std::to_string(response->status) : why)
                                                      << "; peak RSS +" << (after.peak_kib - before.rss_kib) / 1024
                                                      << " MiB");
    CHECK(took < 15);
    if (response) CHECK(response->status == 413);
    // The service holds at most max_request_bytes (16 MiB) of it, whatever was sent.
    if (psych::testing::rss_is_meaningful) CHECK(after.peak_kib - before.rss_kib < 64 * 1024);
  }
  CHECK(describe_answers(port, token));
  const auto stats = s->service->stats();
  CHECK(stats.executions_started == 0);
  check_nothing_left(*s->service);
}

TEST_CASE("hostile client: a slowloris header is closed by the request timeout") {
  const auto token = fresh_token();
  auto s = service_or_skip({"alice " + token});
  if (!s) return;
  const auto c = connection_to(*s);
  const std::string header = "GET /v1/describe HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token +
                             "\r\nAccept: application/json\r\n\r\n";
  const auto slowloris = trickle(*c, header, "slowloris, a header (request_timeout_seconds 2)");
  CHECK(slowloris.closed);
  CHECK(slowloris.sent < header.size());
  CHECK(slowloris.seconds >= 1.5);
  CHECK(slowloris.seconds < 15);
  CHECK(describe_answers(s->service->port(), token));
  check_nothing_left(*s->service);
}

TEST_CASE("hostile client: a body sent a byte at a time is closed by the request timeout") {
  const auto token = fresh_token();
  auto s = service_or_skip({"alice " + token});
  if (!s) return;
  const auto c = connection_to(*s);
  const std::string body = R"({"version":"psych-remote/1","program":"6*7","terms":{}})";
  REQUIRE(c->send("POST /v1/executions/trickle-1 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token +
                  "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n"));
  const auto trickled_body = trickle(*c, body, "a trickled body");
  CHECK(trickled_body.closed);
  CHECK(trickled_body.sent < body.size());
  CHECK(trickled_body.seconds < 15);
  CHECK(s->service->stats().executions_started == 0);
  CHECK(describe_answers(s->service->port(), token));
  check_nothing_left(*s->service);
}

TEST_CASE("hostile client: beyond max_connections a connection is closed as it is accepted") {
  constexpr int cap = 16, opened = 100;
  const auto token = fresh_token();
  auto s = service_or_skip({"alice " + token}, [](psych::sandbox_service_options& o) {
    o.max_connections = cap;
    o.request_timeout_seconds = 3;
  });
  if (!s) return;
  const auto sockets = idle_connections(s->service->port(), opened);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  int held = 0;
  for (const int fd : sockets)
    if (!closed_by_service(fd)) ++held;
  MESSAGE(held << " of " << opened << " connections held by a service with max_connections " << cap);
  CHECK(held <= cap);
  CHECK(held >= 1);
  for (const int fd : sockets) ::close(fd);
  // Once they are gone, a real client is served again.
  CHECK(eventually([&] { return describe_answers(s->service->port(), token); }, std::chrono::seconds(10)));
  check_nothing_left(*s->service);
}

TEST_CASE("hostile client: a thousand idle connections neither stop the service nor stay open") {
  constexpr int idle = 1000;
  // Long enough that all of them are accepted and a real client is served before the first one
  // times out, on a loaded 2-core machine (ctest runs this beside the conformance suite).
  constexpr double handshake_timeout = 20;
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  if (files.rlim_cur < 2 * idle + 256) {
    files.rlim_cur = std::min<rlim_t>(files.rlim_max, 4 * idle);
    ::setrlimit(RLIMIT_NOFILE, &files);
    ::getrlimit(RLIMIT_NOFILE, &files);
  }
  if (files.rlim_cur < 2 * idle + 256) {
    psych::testing::skip_case("RLIMIT_NOFILE's hard limit is below what 1000 connections take on both ends: " +
                              std::to_string(files.rlim_max));
    return;
  }
  const auto token = fresh_token();
  // Enough room for every idle connection and the real client: this case asks whether the event loop
  // stays responsive and the timeouts close them, not where the connection cap is.
  auto s = service_or_skip({"alice " + token}, [](psych::sandbox_service_options& o) {
    o.max_connections = idle + 64;
    o.request_timeout_seconds = handshake_timeout;  // time to use the service while every idle one is held
  });
  if (!s) return;
  const auto client = ready_client(client_options(*s, token));

  const auto fds_before = open_descriptors();
  const auto memory_before = read_memory();
  const auto opened_at = std::chrono::steady_clock::now();
  const auto sockets = idle_connections(s->service->port(), idle);
  // Every one accepted: each end is a descriptor of this process.
  // (A descriptor or two of the service's own may come and go meanwhile.)
  const bool all_accepted =
      eventually([&] { return open_descriptors() >= fds_before + 2 * idle - 2; }, std::chrono::seconds(12));
  const auto fds_held = open_descriptors();
  MESSAGE("descriptors: " << fds_before << " before, " << fds_held << " with " << idle << " idle connections");
  CHECK(all_accepted);

  // The service still answers a real client, at once.
  const auto start = std::chrono::steady_clock::now();
  const auto d = client->describe();
  const double describe_took = seconds_since(start);
  const auto r = client->run({.program = "6*7", .terms = short_terms(10)});
  const double run_took = seconds_since(start) - describe_took;
  MESSAGE("with " << idle << " idle connections: describe " << describe_took << " s, run " << run_took << " s");
  CHECK(d.ready);
  CHECK_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
  CHECK(describe_took < 5);
  CHECK(run_took < 10);
  // ... while the idle ones were all still held by the service.
  const auto fds_during = open_descriptors();
  CHECK(fds_during >= fds_before + 2 * idle - 2);

  // The handshake timeout (request_timeout_seconds) closes every idle one.
  int closed = 0;
  const auto deadline = opened_at + std::chrono::seconds(static_cast<int>(handshake_timeout) + 25);
  std::vector<bool> seen(sockets.size(), false);
  while (closed < idle && std::chrono::steady_clock::now() < deadline) {
    for (std::size_t i = 0; i < sockets.size(); ++i) {
      if (seen[i] || !closed_by_service(sockets[i])) continue;
      seen[i] = true;
      ++closed;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double closed_after = seconds_since(opened_at);
  const auto fds_after_timeout = open_descriptors();
  const auto memory_after = read_memory();
  MESSAGE(closed << " of " << idle << " idle connections closed by the service after " << closed_after
                 << " s; descriptors then " << fds_after_timeout << "; RSS " << memory_before.rss_kib / 1024 << " -> "
                 << memory_after.rss_kib / 1024 << " MiB");
  CHECK(closed == idle);
  CHECK(closed_after >= handshake_timeout - 0.5);
  CHECK(closed_after < handshake_timeout + 25);
  // The service's ends are gone; only this test's own remain.
  CHECK(fds_after_timeout <= fds_before + idle + 8);
  for (const int fd : sockets) ::close(fd);
  CHECK(eventually([&] { return open_descriptors() <= fds_before + 8; }, std::chrono::seconds(5)));
  CHECK(describe_answers(s->service->port(), token));
  check_nothing_left(*s->service);
}

TEST_CASE("hostile client: a wrong credential is 401 with one body, whatever is wrong with it") {
  const auto token = fresh_token();
  auto s = service_or_skip({"alice " + token});
  if (!s) return;
  const auto port = s->service->port();
  const std::vector<std::pair<std::string, header_list>> wrong{
      {"no Authorization header", {}},
      {"another scheme", {{"Authorization", "Basic " + token}}},
      {"no scheme", {{"Authorization", token}}},
      {"a wrong token", {{"Authorization", "Bearer " + fresh_token()}}},
      {"a prefix of the token", {{"Authorization", "Bearer " + token.substr(0, token.size() - 1)}}},
      {"the token and more", {{"Authorization", "Bearer " + token + "0"}}},
      {"the token with a space after", {{"Authorization", "Bearer " + token + " x"}}},
      {"an empty token", {{"Authorization", "Bearer "}}},
      {"two spaces", {{"Authorization", "Bearer  " + token}}},
  };
  const std::vector<std::pair<std::string, std::string>> routes{{"GET", "/v1/describe"},
                                                                {"POST", "/v1/executions/e-401"},
                                                                {"POST", "/v1/executions/e-401/results"},
                                                                {"POST", "/v1/executions/e-401/cancel"}};
  int attempts = 0;
  for (const auto& [what, headers] : wrong) {
    for (const auto& [method, target] : routes) {
      CAPTURE(what);
      CAPTURE(target);
      std::string why;
      const std::string body = target == "/v1/executions/e-401" ? R"({"version":"psych-remote/1","program":"6*7","terms":{}})" : "";
      const auto response = raw_request(port, method, target, headers, body, &why);
      REQUIRE_MESSAGE(response, why);
      ++attempts;
      CHECK(response->status == 401);
      CHECK(response->body == unauthorized_body);
      CHECK(response->www_authenticate == "Bearer");
    }
  }
  // The right one, as a control: the same requests are not refused for their form.
  const auto ok = raw_request(port, "GET", "/v1/describe", bearer(token));
  REQUIRE(ok);
  CHECK(ok->status == 200);
  const auto stats = s->service->stats();
  CHECK(stats.refused[psych::service_refusal::unauthorized] == static_cast<std::uint64_t>(attempts));
  CHECK(stats.executions_started == 0);
  for (const auto& line : s->log->lines()) CHECK(line.find(token) == std::string::npos);
  check_nothing_left(*s->service);
}

TEST_CASE("hostile client: another credential cannot cancel (or answer) an execution it does not own") {
  const auto alice = fresh_token(), bob = fresh_token();
  auto s = service_or_skip({"alice " + alice, "bob " + bob});
  if (!s) return;
  const auto port = s->service->port();
  const auto client = ready_client(client_options(*s, alice));

  psych::run_request request{.program = "import time\ntime.sleep(3)\nprint('done')\n42", .terms = short_terms(20)};
  request.run.execution_id = "owned-by-alice-1";
  auto running = std::async(std::launch::async, [&] { return client->run(request); });
  REQUIRE(eventually([&] { return s->service->stats().running == 1; }, std::chrono::seconds(10)));

  const auto cancel = raw_request(port, "POST", "/v1/executions/owned-by-alice-1/cancel", bearer(bob));
  const auto results = raw_request(port, "POST", "/v1/executions/owned-by-alice-1/results",
                                   {{"Authorization", "Bearer " + bob}, {"Content-Type", "application/x-ndjson"}},
                                   R"({"type":"result","id":1,"ok":true,"value":1})" "\n");
  const auto cancel_nobody = raw_request(port, "POST", "/v1/executions/nobody-has-this-1/cancel", bearer(bob));
  const auto results_nobody = raw_request(port, "POST", "/v1/executions/nobody-has-this-1/results",
                                          {{"Authorization", "Bearer " + bob}, {"Content-Type", "application/x-ndjson"}},
                                          R"({"type":"result","id":1,"ok":true,"value":1})" "\n");
  REQUIRE(cancel);
  REQUIRE(results);
  REQUIRE(cancel_nobody);
  REQUIRE(results_nobody);
  CHECK(cancel->status == 404);
  CHECK(results->status == 404);
  // Somebody else's execution is answered exactly as one that does not exist.
  CHECK(cancel->body == cancel_nobody->body);
  CHECK(results->body == results_nobody->body);
  CHECK(cancel->body.find("\"error\":\"not_found\"") != std::string::npos);
  CHECK(results->body.find("\"error\":\"not_found\"") != std::string::npos);

  const auto r = running.get();
  CHECK_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
  CHECK_FALSE(r.cancelled);
  REQUIRE(r.value);
  CHECK(r.value->text == "42");
  CHECK(r.stdout_data == "done\n");
  const auto stats = s->service->stats();
  CHECK(stats.executions_cancelled == 0);
  CHECK(stats.executions_finished() == 1);
  check_nothing_left(*s->service);
}

TEST_CASE("hostile client: request bodies are bounded by max_request_bytes, not by Beast's default") {
  const auto token = fresh_token();
  auto s = service_or_skip({"alice " + token});
  if (!s) return;
  const auto client = ready_client(client_options(*s, token));
  // 2 MiB: over Beast's default body limit (1 MiB), well under max_request_bytes (16 MiB).
  const std::string padding = "# " + std::string(2u << 20, 'p') + "\n";
  const auto big = client->run({.program = padding + "6*7\n", .terms = short_terms(20)});
  CHECK_MESSAGE(big.ok(), (big.failure ? big.failure->message : ""));
  if (big.value) CHECK(big.value->text == "42");
  // 17 MiB: over max_request_bytes. Refused before anything runs (413, or the connection closed
  // under the rest of the body); the client says so, and nothing started.
  const std::string too_much = "# " + std::string(17u << 20, 'p') + "\n";
  const auto start = std::chrono::steady_clock::now();
  const auto refused = client->run({.program = too_much + "6*7\n", .terms = short_terms(20)});
  const double took = seconds_since(start);
  MESSAGE("a 17 MiB execution request: " << took << " s; " << (refused.failure ? refused.failure->message : "no failure"));
  REQUIRE(refused.failure);
  CHECK(refused.failure->kind == psych::failure_kind::provider_error);
  CHECK(took < 15);
  const auto stats = s->service->stats();
  CHECK(stats.executions_started == 1);
  CHECK(describe_answers(s->service->port(), token));
  check_nothing_left(*s->service);
}

TEST_CASE("hostile client: X-Forwarded-For is believed only from a trusted proxy, and only its last address") {
  // Both services log the same requests; only the one told that 127.0.0.1 is its load balancer
  // takes the header's word, and then only the address that proxy appended (the last one), never
  // text that is not an address. (Documentation addresses: nothing connects to them.)
  const auto token = fresh_token();
  for (const bool trusted : {true, false}) {
    CAPTURE(trusted);
    auto s = service_or_skip({"alice " + token}, [&](psych::sandbox_service_options& o) {
      if (trusted) o.trusted_proxies = {"127.0.0.1"};
    });
    if (!s) return;
    const auto port = s->service->port();
    for (const char* forwarded : {"203.0.113.9, 198.51.100.7", "2001:db8::1", "\"><script>", ""}) {
      auto headers = bearer(token);
      if (*forwarded) headers.emplace_back("X-Forwarded-For", forwarded);
      const auto response = raw_request(port, "GET", "/v1/describe", headers);
      REQUIRE(response);
      CHECK(response->status == 200);
    }
    // (A request is logged once its response is written: the last line may come after it.)
    REQUIRE(eventually([&] { return s->log->lines().size() == 4; }, std::chrono::seconds(5)));
    std::vector<std::string> logged;
    for (const auto& line : s->log->lines()) {
      const auto at = line.find("\"forwarded_for\":\"");
      REQUIRE_MESSAGE(at != std::string::npos, line);
      logged.push_back(line.substr(at + 17, line.find('"', at + 17) - at - 17));
    }
    const std::vector<std::string> expected =
        trusted ? std::vector<std::string>{"198.51.100.7", "2001:db8::1", "invalid", ""}
                : std::vector<std::string>{"", "", "", ""};
    CHECK_MESSAGE(logged == expected, fmt::format("{}", fmt::join(logged, " | ")));
  }
}

TEST_CASE("hostile client: a trusted proxy that is not an address is a configuration error") {
  const auto token = fresh_token();
  std::string why;
  const auto* tls = certificate_or_skip();
  if (!tls) return;
  const auto s = start_service({"alice " + token}, *tls, &why,
                               [](psych::sandbox_service_options& o) { o.trusted_proxies = {"haproxy.internal"}; });
  CHECK_FALSE(s);
  CHECK_MESSAGE(why.find("haproxy.internal") != std::string::npos, why);
}
