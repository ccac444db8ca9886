// psych mcp over Streamable HTTP against clients that would make it hold without bound: a huge body,
// a flood of requests, a client that never reads, too many sessions, connections or requests at
// once, a client that sends its header slowly. Each is refused by name or cut off, the server's
// memory stays bounded, and another session is served meanwhile.
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "mcp_http_support.hpp"
#include "rss.hpp"

using namespace mcp_http_test;

namespace {

/// A tools/call answered as one JSON body on its own connection: its `value`, REQUIREd to come.
std::string call_value(const endpoint& to, const std::string& session, std::int64_t id, const std::string& program) {
  const auto answered =
      exchange(to, {.body = run_code_text(id, program), .session = session, .accept = "application/json"}, 60);
  REQUIRE_MESSAGE(answered.status == 200, answered.body);
  return value_of(answered.body);
}

/// Checks how much this process's resident set grew while `memory` sampled it against `bound_kib`,
/// where RSS means something (not under AddressSanitizer, rss.hpp).
void check_growth(memory_peak& memory, long bound_kib) {
  const auto peak = memory.stop();
  MESSAGE("resident set: " << memory.before_kib() << " KiB before, " << peak << " KiB at most during");
  if (psych::testing::rss_is_meaningful) CHECK(peak - memory.before_kib() < bound_kib);
}

}  // namespace

TEST_CASE("a body over max_request_bytes is refused 413 before it is read, and others are still served") {
  const auto s = server_or_skip();
  if (!s) return;
  const auto to = s->at();
  const auto session = open_session(to);
  memory_peak memory;
  SUBCASE("a declared Content-Length of 1 GiB, 8 MiB of it sent") {
    auto c = connect(to);
    const auto head = fmt::format(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\n"
        "Mcp-Session-Id: {}\r\nContent-Length: {}\r\n\r\n",
        s->token, session, std::uint64_t{1} << 30);
    REQUIRE(c->send(head));
    const std::string mebibyte(std::size_t{1} << 20, ' ');
    for (int i = 0; i < 8; ++i)
      if (!c->send(mebibyte, 2)) break;  // the server may have closed already: that is the point
    const auto refused = response_on(*c, 10);
    CHECK(refused.status == 413);
    CHECK(refusal_of(refused) == "too_large");
  }
  SUBCASE("a chunked body that passes the bound as it arrives") {
    auto c = connect(to);
    const auto head = fmt::format(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\n"
        "Mcp-Session-Id: {}\r\nTransfer-Encoding: chunked\r\n\r\n",
        s->token, session);
    REQUIRE(c->send(head));
    const std::string chunk = fmt::format("{:x}\r\n{}\r\n", 1 << 20, std::string(std::size_t{1} << 20, ' '));
    for (int i = 0; i < 8; ++i)
      if (!c->send(chunk, 2)) break;
    const auto refused = response_on(*c, 10);
    CHECK(refused.status == 413);
    CHECK(refusal_of(refused) == "too_large");
  }
  check_growth(memory, 32 * 1024);
  CHECK(s->server->stats().refused[psych::mcp_http_refusal::too_large] == 1);
  CHECK(call_value(to, session, 2, "return 5") == "5");
}

TEST_CASE("a flood of 500 pings is answered or refused by name while another session still works") {
  const auto s = server_or_skip([](psych::mcp_http_options& http, auto&) { http.max_requests_in_flight = 8; });
  if (!s) return;
  const auto to = s->at();
  const auto flooded = open_session(to);
  const auto other = open_session(to);
  // The other session's call runs while the flood is on.
  auto calm = std::async(std::launch::async, [&] {
    const auto answered = exchange(
        to, {.body = run_code_text(9, "import time\ntime.sleep(1)\nreturn 9"), .session = other, .accept = "application/json"},
        60);
    return answered.status == 200 && answered.body.find("\"value\":9") != std::string::npos;
  });
  constexpr int connections = 50, each = 10;
  std::atomic<int> answered{0}, refused{0}, unexplained{0};
  std::vector<std::thread> flood;
  for (int k = 0; k < connections; ++k)
    flood.emplace_back([&, k] {
      std::string why;
      auto c = raw_connection::open(to.port, to.tls, &why);
      if (!c) {
        ++unexplained;
        return;
      }
      // Pipelined: every request written before any answer is read.
      for (int i = 0; i < each; ++i)
        c->send_request("POST", "/mcp",
                        {{"Authorization", "Bearer " + to.token}, {"Content-Type", "application/json"},
                         {"Accept", "application/json, text/event-stream"}, {"Mcp-Session-Id", flooded}},
                        request_text(k * each + i + 100, "ping"));
      for (int i = 0; i < each; ++i) {
        const auto response = c->read_response(30);
        if (!response) {
          unexplained += each - i;
          return;
        }
        if (response->status == 200 && response->body.find("\"result\":{}") != std::string::npos) ++answered;
        else if (response->status == 429 && response->body.find("too_many_requests") != std::string::npos) ++refused;
        else ++unexplained;
      }
    });
  for (auto& t : flood) t.join();
  MESSAGE(answered.load() << " pings answered, " << refused.load() << " refused by name");
  CHECK(answered + refused == connections * each);
  CHECK(unexplained == 0);
  CHECK(answered > 0);
  CHECK(calm.get());
  CHECK(exchange(to, {.body = request_text(1, "ping"), .session = flooded}).status == 200);
}

TEST_CASE("a client that never reads its SSE stream holds the server to bounded memory; others are served") {
  const auto s = server_or_skip([](psych::mcp_http_options& http, auto&) { http.write_timeout_seconds = 2; });
  if (!s) return;
  const auto to = s->at();
  const auto reader = open_session(to);
  const auto other = open_session(to);
  memory_peak memory;
  // 40 MiB of control characters, each six bytes of JSON escape in a progress event (240 MiB), to a
  // client that takes none of it, paced so that the live output reaches the server whole. Without
  // the stream's bound the server would hold what the kernel's buffers cannot, far past 64 MiB.
  auto stuck = connect(to);
  send(to, *stuck,
       {.body = run_code_text(1,
                              "import sys, time\nchunk = '\\x01' * (256 * 1024)\nfor i in range(160):\n"
                              "    sys.stdout.write(chunk)\n    sys.stdout.flush()\n    time.sleep(0.005)\nreturn 1",
                              "flood"),
        .session = reader});
  // Served meanwhile, more than once.
  for (int i = 0; i < 3; ++i) CHECK(call_value(to, other, 10 + i, "return 7") == "7");
  // The server gives the stuck stream up once a write has waited its timeout: the answer had
  // nowhere to go, and progress was dropped on the way. Only then does the client read, and finds
  // the connection closed after what the kernel's buffers held.
  CHECK(eventually([&] { return s->server->stats().answers_undelivered >= 1; }, std::chrono::seconds(90)));
  CHECK(s->server->stats().progress_dropped > 0);
  CHECK(stuck->closed_within(30));
  check_growth(memory, 64 * 1024);
  CHECK(call_value(to, reader, 20, "return 8") == "8");
}

TEST_CASE("past max_sessions an initialize is refused 503 by name; an ended session makes room") {
  const auto s = server_or_skip([](psych::mcp_http_options& http, auto&) { http.max_sessions = 2; });
  if (!s) return;
  const auto to = s->at();
  const auto first = open_session(to);
  open_session(to);
  const auto refused = exchange(to, {.body = request_text(1, "initialize", R"({"protocolVersion":"2025-11-25"})")});
  CHECK(refused.status == 503);
  CHECK(refusal_of(refused) == "too_many_sessions");
  CHECK(exchange(to, {.method = "DELETE", .session = first}).status == 200);
  open_session(to);
}

TEST_CASE("past max_requests_in_flight a session's POST is refused 429 by name") {
  const auto s = server_or_skip([](psych::mcp_http_options& http, auto&) { http.max_requests_in_flight = 2; });
  if (!s) return;
  const auto to = s->at();
  const auto session = open_session(to);
  std::vector<started_stream> streams;
  for (int id = 1; id <= 2; ++id)
    streams.push_back(start_stream(
        to, {.body = run_code_text(id, "import time\nprint('on', flush=True)\ntime.sleep(3)\nreturn 1", "p"), .session = session},
        true));
  const auto refused = exchange(to, {.body = request_text(3, "ping"), .session = session});
  CHECK(refused.status == 429);
  CHECK(refusal_of(refused) == "too_many_requests");
  // Another session is not held to this one's count.
  CHECK(exchange(to, {.body = request_text(1, "ping"), .session = open_session(to)}).status == 200);
  for (auto& stream : streams) {
    while (stream.events->next(30)) {
    }
    CHECK(stream.events->ended());
  }
  CHECK(exchange(to, {.body = request_text(4, "ping"), .session = session}).status == 200);
}

TEST_CASE("past max_connections one more connection is closed at once") {
  const auto s = server_or_skip([](psych::mcp_http_options& http, auto&) { http.max_connections = 3; });
  if (!s) return;
  const auto to = s->at();
  std::vector<std::unique_ptr<raw_connection>> held;
  for (int i = 0; i < 3; ++i) held.push_back(connect(to));
  REQUIRE(eventually([&] { return s->server->stats().connections == 3; }));
  auto one_more = connect(to);
  CHECK(one_more->closed_within(5));
  held.pop_back();
  REQUIRE(eventually([&] { return s->server->stats().connections == 2; }));
  CHECK(exchange(to, {.body = request_text(1, "initialize", R"({"protocolVersion":"2025-11-25"})")}).status == 200);
}

TEST_CASE("a header that is too large, or too slow, ends its connection") {
  const auto s = server_or_skip([](psych::mcp_http_options& http, auto&) { http.request_timeout_seconds = 1; });
  if (!s) return;
  const auto to = s->at();
  SUBCASE("over 16 KiB of header: 431, named") {
    auto c = connect(to);
    REQUIRE(c->send("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + std::string(32 * 1024, 'a') +
                    "\r\n\r\n"));
    const auto refused = response_on(*c, 5);
    CHECK(refused.status == 431);
    CHECK(refusal_of(refused) == "too_large");
  }
  SUBCASE("a header that never ends: closed after the request timeout") {
    auto c = connect(to);
    REQUIRE(c->send("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
    const auto began = std::chrono::steady_clock::now();
    CHECK(c->closed_within(10));
    CHECK(std::chrono::steady_clock::now() - began < std::chrono::seconds(5));
  }
}
