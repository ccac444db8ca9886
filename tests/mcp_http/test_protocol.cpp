// psych mcp over Streamable HTTP as a well-behaved client meets it (docs/mcp-server-http.md):
// sessions, the answers as one JSON body or an SSE stream, progress, what each refusal says, and a
// cancel.
#include <chrono>
#include <string>
#include <thread>

#include <doctest/doctest.h>
#include <rapidjson/pointer.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "mcp_http_support.hpp"
#include "service_kit.hpp"

using namespace mcp_http_test;

namespace {

bool is_lower_hex(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

/// A tools/call answered on an SSE stream: the events' data, the answer last. REQUIREs the stream
/// to be one and to end.
std::vector<std::string> streamed_events(const endpoint& to, const std::string& session, const std::string& body,
                                         double timeout = 60) {
  auto stream = start_stream(to, {.body = body, .session = session}, false);
  std::vector<std::string> out;
  while (auto event = stream.events->next(timeout)) out.push_back(std::move(*event));
  CHECK_MESSAGE(stream.events->ended(), "the stream did not end after its answer");
  return out;
}

void check_session_round_trip(const endpoint& to) {
  const auto answered = exchange(
      to, {.body = request_text(1, "initialize",
                                R"({"protocolVersion":"2025-06-18","capabilities":{},)"
                                R"("clientInfo":{"name":"mcp-http-tests","version":"1"}})")});
  REQUIRE_MESSAGE(answered.status == 200, answered.body);
  CHECK(answered.content_type == "application/json");
  const auto session = answered.header("Mcp-Session-Id");
  CHECK_MESSAGE(session.size() == 32, session);  // 128 random bits
  CHECK(is_lower_hex(session));
  const auto initialized = parsed(answered.body);
  CHECK(string_at(initialized, "/result/protocolVersion") == "2025-06-18");
  CHECK(string_at(initialized, "/result/serverInfo/name") == "psych");

  const auto listed = exchange(to, {.body = request_text(2, "tools/list"), .session = session});
  REQUIRE_MESSAGE(listed.status == 200, listed.body);
  CHECK(listed.content_type == "application/json");  // an answer made at once is one JSON body
  CHECK(listed.header("Mcp-Session-Id").empty());     // only initialize's answer carries it
  const auto tools = parsed(listed.body);
  CHECK(string_at(tools, "/result/tools/0/name") == "run_code");
  CHECK(string_at(tools, "/result/tools/1/name") == "read_tool_output");

  const auto events = streamed_events(to, session, run_code_text(3, "return 1"));
  REQUIRE(events.size() == 1);
  CHECK(value_of(events.back()) == "1");
  CHECK(parsed(events.back())["id"].GetInt() == 3);
}

}  // namespace

TEST_CASE("initialize opens a session whose id its answer carries; the session then lists and runs") {
  SUBCASE("plain HTTP on loopback") {
    const auto s = server_or_skip();
    if (!s) return;
    check_session_round_trip(s->at());
    CHECK(s->server->stats().sessions == 1);
  }
  SUBCASE("TLS") {
    const auto s = server_or_skip({}, true);
    if (!s) return;
    check_session_round_trip(s->at());
  }
}

TEST_CASE("tools/call comes as an SSE stream when the client takes one, and as one JSON body when not") {
  const auto s = server_or_skip();
  if (!s) return;
  const auto to = s->at();
  const auto session = open_session(to);
  SUBCASE("an SSE stream: the answer is its one event, and the stream ends") {
    const auto events = streamed_events(to, session, run_code_text(7, "return 6 * 7"));
    REQUIRE(events.size() == 1);
    CHECK(value_of(events[0]) == "42");
    CHECK(parsed(events[0])["id"].GetInt() == 7);
  }
  SUBCASE("Accept without text/event-stream: one JSON body") {
    const auto answered =
        exchange(to, {.body = run_code_text(8, "return [1, 2]"), .session = session, .accept = "application/json"});
    REQUIRE_MESSAGE(answered.status == 200, answered.body);
    CHECK(answered.content_type == "application/json");
    CHECK(value_of(answered.body) == "[1,2]");
  }
  SUBCASE("text/event-stream at q=0 is not taken") {
    const auto answered = exchange(
        to, {.body = run_code_text(9, "return 3"), .session = session, .accept = "application/json, text/event-stream;q=0"});
    CHECK(answered.content_type == "application/json");
    CHECK(value_of(answered.body) == "3");
  }
  SUBCASE("several calls on one kept-alive connection") {
    auto c = connect(to);
    for (int id = 20; id < 23; ++id) {
      send(to, *c, {.body = run_code_text(id, "return " + std::to_string(id)), .session = session,
                    .accept = "application/json"});
      std::string why;
      const auto answered = c->read_response(60, &why);
      REQUIRE_MESSAGE(answered, why);
      CHECK(value_of(answered->body) == std::to_string(id));
    }
  }
}

TEST_CASE("run_code's output comes as progress events before its answer") {
  const auto s = server_or_skip();
  if (!s) return;
  const auto to = s->at();
  const auto session = open_session(to);
  const std::string program =
      "import time\nfor i in range(3):\n    print('line', i, flush=True)\n    time.sleep(0.3)\nreturn 'done'";
  SUBCASE("on an SSE stream: progress on the request's token, then the answer") {
    const auto events = streamed_events(to, session, run_code_text(4, program, "progress-4"));
    REQUIRE(events.size() >= 2);
    std::string shown;
    for (std::size_t i = 0; i + 1 < events.size(); ++i) {
      const auto event = parsed(events[i]);
      CHECK(string_at(event, "/method") == "notifications/progress");
      CHECK(string_at(event, "/params/progressToken") == "progress-4");
      shown += string_at(event, "/params/message");
    }
    CHECK_MESSAGE(shown.find("line 0") != std::string::npos, shown);
    CHECK_MESSAGE(shown.find("line 2") != std::string::npos, shown);
    CHECK(value_of(events.back()) == "\"done\"");
  }
  SUBCASE("as one JSON body: the answer alone (a body has no room for progress)") {
    const auto answered = exchange(
        to, {.body = run_code_text(5, program, "progress-5"), .session = session, .accept = "application/json"});
    REQUIRE_MESSAGE(answered.status == 200, answered.body);
    CHECK(value_of(answered.body) == "\"done\"");
  }
}

TEST_CASE("every request needs a bearer token of the token file, re-read on reload") {
  const auto s = server_or_skip();
  if (!s) return;
  const auto to = s->at();
  const auto initialize = request_text(1, "initialize", R"({"protocolVersion":"2025-11-25"})");
  SUBCASE("none, a wrong one, another scheme: 401 with WWW-Authenticate: Bearer") {
    for (const auto& header : {std::string{}, std::string("Bearer tok-wrong"), "Basic " + s->token}) {
      http_call call{.body = initialize, .token = ""};
      if (!header.empty()) call.extra.emplace_back("Authorization", header);
      const auto refused = exchange(to, call);
      CHECK(refused.status == 401);
      CHECK(refused.www_authenticate == "Bearer");
      CHECK(refusal_of(refused) == "unauthorized");
      CHECK(refused.body.find(s->token) == std::string::npos);
    }
    CHECK(s->server->stats().refused[psych::mcp_http_refusal::unauthorized] == 3);
  }
  SUBCASE("reload: the old token is refused, the new one taken; an unreadable file keeps the tokens") {
    const auto fresh = remote_test::fresh_token();
    remote_test::write_file(s->token_file, "tests " + fresh + "\n");
    REQUIRE(s->server->reload_tokens());
    CHECK(exchange(to, {.body = initialize}).status == 401);
    CHECK(exchange(to, {.body = initialize, .token = fresh}).status == 200);
    remote_test::write_file(s->token_file, "# no token at all\n");
    CHECK_FALSE(s->server->reload_tokens());
    CHECK(exchange(to, {.body = initialize, .token = fresh}).status == 200);
  }
}

TEST_CASE("an Origin that is neither loopback nor the listen host is refused 403") {
  const auto s = server_or_skip();
  if (!s) return;
  const auto to = s->at();
  const auto initialize = request_text(1, "initialize", R"({"protocolVersion":"2025-11-25"})");
  for (const char* origin : {"http://evil.example", "https://evil.example:443", "null", "http://127.0.0.1.evil.example",
                             "file://localhost"}) {
    CAPTURE(origin);
    const auto refused = exchange(to, {.body = initialize, .extra = {{"Origin", origin}}});
    CHECK(refused.status == 403);
    CHECK(refusal_of(refused) == "forbidden_origin");
  }
  for (const char* origin : {"http://localhost:3000", "https://LOCALHOST", "http://127.0.0.1", "http://127.1.2.3:8080",
                             "http://[::1]:6274"}) {
    CAPTURE(origin);
    CHECK(exchange(to, {.body = initialize, .extra = {{"Origin", origin}}}).status == 200);
  }
}

TEST_CASE("what a request without a session, with an unknown one, or after DELETE is answered") {
  const auto s = server_or_skip();
  if (!s) return;
  const auto to = s->at();
  const auto session = open_session(to);
  SUBCASE("a POST other than initialize without Mcp-Session-Id: 400") {
    const auto refused = exchange(to, {.body = request_text(2, "tools/list")});
    CHECK(refused.status == 400);
    CHECK(refusal_of(refused) == "missing_session_id");
  }
  SUBCASE("an id the server never made: 404, code -32001") {
    const auto refused = exchange(to, {.body = request_text(2, "tools/list"), .session = "0123456789abcdef0123456789abcdef"});
    CHECK(refused.status == 404);
    CHECK(refusal_of(refused) == "unknown_session");
    CHECK(parsed(refused.body)["error"]["code"].GetInt() == -32001);
  }
  SUBCASE("another credential's request with the id: 404, as for one never made") {
    const auto other = remote_test::fresh_token();
    remote_test::write_file(s->token_file, "tests " + s->token + "\nother " + other + "\n");
    REQUIRE(s->server->reload_tokens());
    const auto refused = exchange(to, {.body = request_text(2, "ping"), .session = session, .token = other});
    CHECK(refused.status == 404);
    CHECK(refusal_of(refused) == "unknown_session");
    CHECK(exchange(to, {.method = "DELETE", .session = session, .token = other}).status == 404);
    CHECK(exchange(to, {.body = request_text(3, "ping"), .session = session}).status == 200);
  }
  SUBCASE("DELETE ends the session: 200, then 404 for it") {
    CHECK(exchange(to, {.method = "DELETE", .session = session}).status == 200);
    CHECK(exchange(to, {.body = request_text(2, "tools/list"), .session = session}).status == 404);
    CHECK(exchange(to, {.method = "DELETE", .session = session}).status == 404);
    CHECK(s->server->stats().sessions == 0);
    CHECK(s->server->stats().sessions_deleted == 1);
  }
  SUBCASE("DELETE without an id: 400") {
    const auto refused = exchange(to, {.method = "DELETE"});
    CHECK(refused.status == 400);
    CHECK(refusal_of(refused) == "missing_session_id");
  }
  SUBCASE("GET (no stream of the server's own) and PUT: 405 with Allow") {
    for (const char* method : {"GET", "PUT"}) {
      const auto refused = exchange(to, {.method = method, .session = session});
      CHECK(refused.status == 405);
      CHECK(refused.header("Allow") == "POST, DELETE");
      CHECK(refusal_of(refused) == "method_not_allowed");
    }
  }
  SUBCASE("a path other than /mcp: 404") {
    const auto refused = exchange(to, {.target = "/mcp/other", .body = request_text(2, "ping"), .session = session});
    CHECK(refused.status == 404);
    CHECK(refusal_of(refused) == "no_such_path");
  }
  SUBCASE("an MCP-Protocol-Version the server does not speak: 400") {
    const auto refused = exchange(to, {.body = request_text(2, "ping"),
                                       .extra = {{"Mcp-Session-Id", session}, {"MCP-Protocol-Version", "1999-01-01"}}});
    CHECK(refused.status == 400);
    CHECK(refusal_of(refused) == "unsupported_protocol_version");
  }
  SUBCASE("an initialize whose answer is an error opens no session") {
    const auto answered = exchange(to, {.body = R"({"jsonrpc":"1.0","id":5,"method":"initialize","params":{}})"});
    CHECK(answered.status == 200);
    CHECK(string_at(parsed(answered.body), "/error/message").find("jsonrpc") != std::string::npos);
    CHECK(answered.header("Mcp-Session-Id").empty());
    CHECK(eventually([&] { return s->server->stats().sessions == 1; }));  // the one opened above
    CHECK(s->server->stats().sessions_opened == 1);
  }
}

TEST_CASE("a message its session does not accept is answered 400 with the session's JSON-RPC error") {
  const auto s = server_or_skip();
  if (!s) return;
  const auto to = s->at();
  const auto session = open_session(to);
  SUBCASE("not JSON: -32700") {
    const auto refused = exchange(to, {.body = "{this is not json", .session = session});
    CHECK(refused.status == 400);
    CHECK(parsed(refused.body)["error"]["code"].GetInt() == -32700);
  }
  SUBCASE("a batch: -32600") {
    const auto refused = exchange(to, {.body = "[" + request_text(2, "ping") + "]", .session = session});
    CHECK(refused.status == 400);
    CHECK(parsed(refused.body)["error"]["code"].GetInt() == -32600);
  }
  SUBCASE("a cancel for a request this session never had: cancel_unknown_request") {
    const auto refused = exchange(
        to, {.body = R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":77}})", .session = session});
    CHECK(refused.status == 400);
    CHECK_MESSAGE(refused.body.find("cancel_unknown_request") != std::string::npos, refused.body);
  }
  SUBCASE("a notification it accepts: 202 and no body") {
    const auto accepted =
        exchange(to, {.body = R"({"jsonrpc":"2.0","method":"notifications/initialized"})", .session = session});
    CHECK(accepted.status == 202);
    CHECK(accepted.body.empty());
  }
}

TEST_CASE("a cancel ends a running tools/call: its stream ends without an answer, and the next call works") {
  const auto s = server_or_skip();
  if (!s) return;
  const auto to = s->at();
  const auto session = open_session(to);
  auto running = start_stream(
      to,
      {.body = run_code_text(5, "import time\nprint('started', flush=True)\ntime.sleep(60)\nreturn 'late'", "p5"),
       .session = session},
      true);
  CHECK(running.first.find("started") != std::string::npos);
  auto& events = *running.events;

  const auto began = std::chrono::steady_clock::now();
  const auto cancelled = exchange(
      to, {.body = R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"test"}})",
           .session = session});
  CHECK(cancelled.status == 202);
  const auto after = events.next(30);
  CHECK_MESSAGE(!after, *after);  // no answer event: the stream just ends
  CHECK(events.ended());
  CHECK(std::chrono::steady_clock::now() - began < std::chrono::seconds(20));

  const auto next = streamed_events(to, session, run_code_text(6, "return 2"));
  REQUIRE(next.size() == 1);
  CHECK(value_of(next[0]) == "2");
}

TEST_CASE("a client that goes away mid-stream does not cancel its execution; its answer is dropped") {
  const auto s = server_or_skip([](auto&, psych::mcp_server_options& sessions) { sessions.max_concurrent_per_session = 1; });
  if (!s) return;
  const auto to = s->at();
  const auto session = open_session(to);
  start_stream(to,
               {.body = run_code_text(1, "import time\nprint('started', flush=True)\ntime.sleep(3)\nreturn 1", "p1"),
                .session = session},
               true);  // and the client closes its connection
  // The one execution the session may run is still running: the next call is refused by name.
  const auto refused = exchange(to, {.body = run_code_text(2, "return 2"), .session = session, .accept = "application/json"});
  CHECK_MESSAGE(refused.body.find("too_many_executions") != std::string::npos, refused.body);
  // Once it has ended, a call runs again, and its answer had nowhere to go.
  bool ran = false;
  for (int attempt = 0; attempt < 100 && !ran; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const auto again =
        exchange(to, {.body = run_code_text(3 + attempt, "return 3"), .session = session, .accept = "application/json"});
    ran = again.body.find("too_many_executions") == std::string::npos;
    if (ran) CHECK(value_of(again.body) == "3");
  }
  CHECK(ran);
  CHECK(s->server->stats().answers_undelivered >= 1);
}

TEST_CASE("a session idle past its expiry is cancelled and forgotten; one being answered is not idle") {
  const auto s = server_or_skip([](psych::mcp_http_options& http, auto&) { http.session_expiry_seconds = 1; });
  if (!s) return;
  const auto to = s->at();
  SUBCASE("idle: forgotten") {
    const auto session = open_session(to);
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    CHECK(exchange(to, {.body = request_text(2, "ping"), .session = session}).status == 404);
    CHECK(s->server->stats().sessions_expired == 1);
    CHECK(s->server->stats().sessions == 0);
  }
  SUBCASE("a call that outlasts the expiry keeps its session") {
    const auto session = open_session(to);
    const auto events = streamed_events(to, session, run_code_text(2, "import time\ntime.sleep(2.5)\nreturn 4"));
    REQUIRE(!events.empty());
    CHECK(value_of(events.back()) == "4");
    CHECK(exchange(to, {.body = request_text(3, "ping"), .session = session}).status == 200);
  }
}
