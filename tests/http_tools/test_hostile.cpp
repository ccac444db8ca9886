// Hostile servers: every misdeed ends as a named outcome within the call's deadline, the host's
// memory stays bounded whatever is sent, no request leaves the declared origin, a call with effects
// is never sent twice, and the credential appears in no outcome even when the server echoes it.
#include <doctest/doctest.h>

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <stop_token>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "http_tools_support.hpp"
#include "rss.hpp"

using namespace psych;
using namespace psych::testing;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {

long peak_rss_kib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

/// One byte a second until the client leaves or the server stops.
bool drip(loopback_server::tcp::socket& socket, const loopback_server& server) {
  if (!loopback_server::write_raw(socket, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"))
    return false;
  for (int second = 0; second < 120; ++second) {
    if (!loopback_server::write_raw(socket, " ")) return false;
    for (int tick = 0; tick < 20; ++tick) {
      if (server.stopping()) return false;
      std::this_thread::sleep_for(milliseconds(50));
    }
  }
  return false;
}

/// How a gigabyte is framed: declared up front (a client may refuse it unread), or only found out
/// as it streams (chunked, or until the connection closes), so the bound must hold while reading.
enum class framing { content_length, chunked, until_close };

/// A gigabyte of JSON-looking bytes, 64 KiB at a time, until the client closes the connection.
bool gigabyte(loopback_server::tcp::socket& socket, const loopback_server& server, framing how) {
  constexpr std::size_t total = std::size_t{1} << 30;
  std::string head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n";
  if (how == framing::content_length) head += "Content-Length: " + std::to_string(total) + "\r\n";
  if (how == framing::chunked) head += "Transfer-Encoding: chunked\r\n";
  if (how == framing::until_close) head += "Connection: close\r\n";
  if (!loopback_server::write_raw(socket, head + "\r\n")) return false;
  const std::string spaces(64 * 1024, ' ');
  const std::string chunk = how == framing::chunked ? "10000\r\n" + spaces + "\r\n" : spaces;
  for (std::size_t sent = 0; sent < total && !server.stopping(); sent += spaces.size())
    if (!loopback_server::write_raw(socket, chunk)) return false;
  return false;
}

}  // namespace

TEST_CASE("a redirect to another origin is refused, and that origin sees no request") {
  loopback_server elsewhere([](const seen_request&, auto& socket, const loopback_server&) {
    return loopback_server::respond(socket, 200, "application/json", R"({"stolen":true})");
  });
  const std::string away = elsewhere.url("/collect");
  loopback_server server([&](const seen_request& request, auto& socket, const loopback_server&) {
    // Another port of 127.0.0.1 is another origin; so is https:// of the same host and port.
    const std::string location = request.target == "/to-https" ? "https://127.0.0.1:1/x" : away;
    return loopback_server::respond(socket, 302, "text/plain", "moved", {{"Location", location}});
  });
  http_tool tool = tool_at(server, "follow", "/start");
  tool.credential = secret_credential();
  auto source = source_of({tool, tool_at(server, "to_https", "/to-https")});
  for (const char* name : {"follow", "to_https"}) {
    CAPTURE(name);
    const auto outcome = call(*source, name);
    CHECK_FALSE(outcome.ok);
    CHECK(outcome.kind == tool_error_kind::denied);
  }
  CHECK(server.requests().size() == 2);
  CHECK(elsewhere.connections() == 0);
  CHECK(elsewhere.requests().empty());
}

TEST_CASE("a server that drips one byte a second ends in timeout within the deadline") {
  loopback_server server([](const seen_request&, auto& socket, const loopback_server& s) { return drip(socket, s); });
  http_tool tool = tool_at(server, "slow", "/slow");
  tool.timeout = milliseconds(1500);
  auto source = source_of({tool});
  const auto began = steady_clock::now();
  const auto outcome = call(*source, "slow");
  const auto took = std::chrono::duration_cast<milliseconds>(steady_clock::now() - began);
  MESSAGE("a 1.5 s deadline against a drip ended after " << took.count() << " ms");
  CHECK(outcome.kind == tool_error_kind::timeout);
  CHECK(took >= milliseconds(1400));
  CHECK(took < milliseconds(1500 + 1000));
}

TEST_CASE("a call whose program gave up ends at once, cancelled") {
  loopback_server server([](const seen_request&, auto& socket, const loopback_server& s) { return drip(socket, s); });
  auto source = source_of({tool_at(server, "slow", "/slow")});
  std::stop_source stop;
  std::thread giver_up([&] {
    std::this_thread::sleep_for(milliseconds(300));
    stop.request_stop();
  });
  const auto began = steady_clock::now();
  const auto outcome = call(*source, "slow", "{}", stop.get_token());
  const auto took = std::chrono::duration_cast<milliseconds>(steady_clock::now() - began);
  giver_up.join();
  CHECK(outcome.kind == tool_error_kind::cancelled);
  CHECK(took < milliseconds(300 + 1000));
}

TEST_CASE("a 1 GiB response is refused at its bound, the connection closed, the host's memory small") {
  const struct {
    std::string_view name;
    framing how;
  } framings[] = {{"Content-Length", framing::content_length}, {"chunked", framing::chunked},
                  {"until close", framing::until_close}};
  for (const auto& f : framings) {
    CAPTURE(f.name);
    loopback_server server([&](const seen_request&, auto& socket, const loopback_server& s) {
      return gigabyte(socket, s, f.how);
    });
    http_tool tool = tool_at(server, "huge", "/huge");
    tool.max_response_bytes = std::size_t{1} << 20;
    auto source = source_of({tool});
    const long before = peak_rss_kib();
    const auto began = steady_clock::now();
    const auto outcome = call(*source, "huge");
    const auto took = std::chrono::duration_cast<milliseconds>(steady_clock::now() - began);
    const long after = peak_rss_kib();
    MESSAGE("1 GiB offered (" << f.name << "), 1 MiB bound: refused after " << took.count() << " ms; peak RSS "
                              << before / 1024 << " MiB before, " << after / 1024 << " MiB after");
    CHECK(outcome.kind == tool_error_kind::binding_result_too_large);
    CHECK(outcome.message.find("1048576") != std::string::npos);
    CHECK(took < milliseconds(10000));
    if (rss_is_meaningful) CHECK(after - before < 32 * 1024);
  }
}

TEST_CASE("a server that echoes the credential never gets it into an outcome") {
  loopback_server server([](const seen_request& request, auto& socket, const loopback_server&) {
    const std::string sent = request.headers.count("authorization") ? request.headers.at("authorization") : "";
    const std::string token = sent.substr(sent.find(' ') + 1);
    if (request.target == "/401")
      return loopback_server::respond(socket, 401, "text/plain", "bad credential: " + sent,
                                      {{"WWW-Authenticate", "Bearer error=\"" + token + "\""}});
    if (request.target == "/500") return loopback_server::respond(socket, 500, "text/plain", "crashed holding " + sent);
    if (request.target == "/json")
      return loopback_server::respond(socket, 200, "application/json",
                                      R"({"you_sent":")" + sent + R"(","again":[")" + token + R"("]})");
    if (request.target == "/escaped") {
      // The token spelt with needless escapes: a plain search of the raw body would miss it.
      std::string escaped;
      for (const char c : token) escaped += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
      return loopback_server::respond(socket, 200, "application/json", R"({"token":")" + escaped + R"("})");
    }
    if (request.target == "/text") return loopback_server::respond(socket, 200, "text/plain", "token=" + token);
    return loopback_server::respond(socket, 302, "text/plain", "", {{"Location", "/?t=" + token}});
  });
  std::vector<http_tool> tools;
  for (const char* path : {"/401", "/500", "/json", "/escaped", "/text"}) {
    http_tool tool = tool_at(server, std::string(path + 1), path);
    tool.credential = secret_credential();
    tools.push_back(tool);
  }
  http_tool post = tool_at(server, "redirect", "/redirect");
  post.method = "POST";
  post.credential = secret_credential();
  tools.push_back(post);
  auto source = source_of(tools);

  const auto refused = call(*source, "401");
  CHECK(refused.kind == tool_error_kind::http_error);
  CHECK(refused.message.starts_with("HTTP 401:"));
  CHECK(refused.message.find("bad credential") == std::string::npos);  // a 401's body is not quoted at all
  const auto crashed = call(*source, "500");
  CHECK(crashed.kind == tool_error_kind::http_error);
  CHECK(crashed.message == "HTTP 500: crashed holding Bearer [credential]");
  const auto json = call(*source, "json");
  REQUIRE(json.ok);
  CHECK(json.value_json == R"({"you_sent":"Bearer [credential]","again":["[credential]"]})");
  const auto escaped = call(*source, "escaped");
  REQUIRE(escaped.ok);
  CHECK(escaped.value_json == R"({"token":"[credential]"})");
  const auto text = call(*source, "text");
  REQUIRE(text.ok);
  CHECK(text.value_json.find("token=[credential]") != std::string::npos);
  const auto redirect = call(*source, "redirect");
  CHECK(redirect.kind == tool_error_kind::http_error);
  CHECK(redirect.message.find("[credential]") != std::string::npos);
}

TEST_CASE("a POST whose connection drops after it was sent is unknown_outcome, and is never sent again") {
  loopback_server server([](const seen_request&, auto&, const loopback_server&) { return false; });
  http_tool tool = tool_at(server, "charge", "/charge");
  tool.method = "POST";
  tool.body = http_body_mapping::json;
  auto source = source_of({tool});
  const auto outcome = call(*source, "charge", R"({"amount":5})");
  CHECK(outcome.kind == tool_error_kind::unknown_outcome);
  CHECK(server.requests().size() == 1);
  CHECK(server.connections() == 1);
}

TEST_CASE("a path argument that tries to climb or leave stays one segment on the wire") {
  loopback_server server([](const seen_request&, auto& socket, const loopback_server&) {
    return loopback_server::respond(socket, 200, "application/json", "{}");
  });
  auto source = source_of({tool_at(server, "file", "/files/{name}")});
  for (const char* name : {"../admin", "a/b", "%2F..", "@evil.example.com", "x?admin=1#frag"})
    CHECK(call(*source, "file", fmt::format(R"({{"name":"{}"}})", name)).ok);
  const auto seen = server.requests();
  REQUIRE(seen.size() == 5);
  CHECK(seen[0].target == "/files/..%2Fadmin");
  CHECK(seen[1].target == "/files/a%2Fb");
  CHECK(seen[2].target == "/files/%252F..");
  CHECK(seen[3].target == "/files/%40evil.example.com");
  CHECK(seen[4].target == "/files/x%3Fadmin%3D1%23frag");
}

TEST_CASE("nothing is sent to a port nobody listens on: unreachable is a tool failure that says so") {
  unsigned short closed_port = 0;
  {
    loopback_server gone([](const seen_request&, auto&, const loopback_server&) { return false; });
    closed_port = gone.port();
  }
  auto source = source_of({{.name = "gone", .url_template = "http://127.0.0.1:" + std::to_string(closed_port) + "/"}});
  const auto outcome = call(*source, "gone");
  CHECK(outcome.kind == tool_error_kind::tool_failed);
  CHECK(outcome.message.find("nothing was sent") != std::string::npos);
}
