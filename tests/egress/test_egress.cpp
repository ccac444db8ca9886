// The egress seam (src/host/http/egress.hpp) against loopback servers that behave and that do not:
// each case ends in a named outcome by its deadline, with the host's memory bounded, and reaches
// nothing but the one origin.
#include <sys/resource.h>

#include <chrono>
#include <stop_token>
#include <string>
#include <thread>

#include <doctest/doctest.h>

#include "http/egress.hpp"
#include "rss.hpp"
#include "scripted_server.hpp"

using namespace psych::host;
using psych::testing::received_request;
using psych::testing::scripted_server;
using clock_type = std::chrono::steady_clock;

namespace {

egress_limits within(std::chrono::milliseconds budget, std::size_t max_body = 1 << 20) {
  return {.deadline = clock_type::now() + budget, .max_body_bytes = max_body};
}

std::unique_ptr<egress_client> client_of(const std::string& url) {
  auto made = egress_client::create(url);
  REQUIRE_MESSAGE(made, (made ? "" : made.error().message()));
  return std::move(made).value();
}

long peak_rss_kib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

}  // namespace

TEST_CASE("parse_http_url: an origin and a target, or a refusal by name") {
  auto url = parse_http_url("HTTPS://api.example.com:8443/v1/items?q=1");
  REQUIRE(url);
  CHECK(url.value().origin.tls);
  CHECK(url.value().origin.host == "api.example.com");
  CHECK(url.value().origin.port == "8443");
  CHECK(url.value().target == "/v1/items?q=1");
  CHECK(parse_http_url("http://127.0.0.1").value().target == "/");
  CHECK(parse_http_url("http://127.0.0.1?x=1").value().target == "/?x=1");
  CHECK(parse_http_url("http://[::1]:9/p").value().origin.host == "::1");
  for (const char* bad : {"ftp://x/", "https://user:pass@x/", "https://x/a#b", "https://x/a b", "https://x/\xC3\xA9",
                          "x/y", "https://:80/"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_http_url(bad));
  }
  CHECK(parse_http_url("https://user:pass@x/").error().message().find("secret resolver") != std::string::npos);
  CHECK(parse_http_url("https://user:pass@x/").error().message().find("pass") == std::string::npos);
}

TEST_CASE("redact replaces every occurrence of the secret") {
  CHECK(redact("a tok b toktok", "tok") == "a [credential] b [credential][credential]");
  CHECK(redact("nothing", "") == "nothing");
}

TEST_CASE("create: https, or http:// to loopback only; nothing is sent") {
  CHECK(egress_client::create("http://127.0.0.1:1/x"));
  CHECK(egress_client::create("http://localhost:1/"));
  auto far = egress_client::create("http://example.com/api");
  REQUIRE_FALSE(far);
  CHECK(far.error().message().find("loopback") != std::string::npos);
  CHECK(egress_client::create("http://example.com/api", {.allow_insecure_http = true}));
  CHECK_FALSE(egress_client::create("https://example.com/", {.ca_file = "/nonexistent/ca.pem"}));
  auto with_path = client_of("http://127.0.0.1:9/mcp");
  CHECK(with_path->base_target() == "/mcp");
  CHECK(origin_text(with_path->origin()) == "http://127.0.0.1:9");
}

TEST_CASE("target_of keeps a request at the origin") {
  auto client = client_of("http://127.0.0.1:9/");
  CHECK(client->target_of("/a?b=c").value() == "/a?b=c");
  CHECK(client->target_of("http://127.0.0.1:9/z").value() == "/z");
  CHECK(client->target_of("HTTP://127.0.0.1:9/z").value() == "/z");
  for (const char* elsewhere : {"http://127.0.0.1:10/z", "https://127.0.0.1:9/z", "//evil.example/x",
                                "http://127.0.0.2:9/", "relative/path", "/a b"}) {
    CAPTURE(elsewhere);
    auto refused = client->target_of(elsewhere);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().kind == egress_error_kind::refused);
  }
}

TEST_CASE("a GET and a POST, headers and body as sent") {
  scripted_server server([](const received_request& request, scripted_server::socket& s) {
    scripted_server::respond(s, request.target() == "/missing" ? 404 : 200, R"({"got":")" + request.target() + "\"}");
  });
  auto client = client_of(server.url());
  auto got = client->fetch({.method = "POST",
                            .target = "/items?x=1",
                            .headers = {{"Authorization", "Bearer t0k"}, {"Content-Type", "application/json"}},
                            .body = R"({"a":1})"},
                           within(std::chrono::seconds(5)), {});
  REQUIRE_MESSAGE(got, (got ? "" : got.error().message()));
  CHECK(got.value().head.status == 200);
  CHECK(got.value().head.header("content-type") == "application/json");
  CHECK(got.value().body == R"({"got":"/items?x=1"})");
  const auto seen = server.requests();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].head.starts_with("POST /items?x=1 HTTP/1.1\r\n"));
  CHECK(seen[0].head.find("Authorization: Bearer t0k\r\n") != std::string::npos);
  CHECK(seen[0].head.find("Host: 127.0.0.1:") != std::string::npos);
  CHECK(seen[0].body == R"({"a":1})");

  auto missing = client->fetch({.target = "/missing"}, within(std::chrono::seconds(5)), {});
  REQUIRE(missing);
  CHECK(missing.value().head.status == 404);  // a status is the caller's to judge
}

TEST_CASE("a header that would smuggle a line, or a bad method, is refused before anything is sent") {
  scripted_server server([](const received_request&, scripted_server::socket& s) { scripted_server::respond(s, 200, "{}"); });
  auto client = client_of(server.url());
  for (const egress_request& bad : {egress_request{.headers = {{"Authorization", "Bearer x\r\nX-Evil: 1"}}},
                                    egress_request{.headers = {{"Bad Name", "v"}}},
                                    egress_request{.method = "GET /x HTTP/1.1\r\n"},
                                    egress_request{.target = "/a\r\nX: y"}}) {
    auto refused = client->fetch(bad, within(std::chrono::seconds(2)), {});
    REQUIRE_FALSE(refused);
    CHECK(refused.error().kind == egress_error_kind::refused);
    CHECK_FALSE(refused.error().sent);
    CHECK(refused.error().message().find("Bearer") == std::string::npos);
  }
  CHECK(server.requests().empty());
}

TEST_CASE("a same-origin redirect of a GET is followed; another origin's is refused and never reached") {
  scripted_server elsewhere([](const received_request&, scripted_server::socket& s) { scripted_server::respond(s, 200, "{}"); });
  const std::string other = elsewhere.url("/stolen");
  scripted_server server([&](const received_request& request, scripted_server::socket& s) {
    if (request.target() == "/start") return scripted_server::respond(s, 302, "", "text/plain", "Location: /end\r\n");
    if (request.target() == "/loop") return scripted_server::respond(s, 301, "", "text/plain", "Location: /loop\r\n");
    if (request.target() == "/away") return scripted_server::respond(s, 302, "", "text/plain", "Location: " + other + "\r\n");
    if (request.target() == "/downgrade")
      return scripted_server::respond(s, 308, "", "text/plain", "Location: https://127.0.0.1:1/x\r\n");
    if (request.target() == "/post") return scripted_server::respond(s, 307, "", "text/plain", "Location: /end\r\n");
    scripted_server::respond(s, 200, R"({"at":"end"})");
  });
  auto client = client_of(server.url());
  auto followed = client->fetch({.target = "/start"}, within(std::chrono::seconds(5)), {});
  REQUIRE(followed);
  CHECK(followed.value().body == R"({"at":"end"})");

  for (const char* target : {"/away", "/downgrade"}) {
    auto refused = client->fetch({.target = target}, within(std::chrono::seconds(5)), {});
    REQUIRE_FALSE(refused);
    CHECK(refused.error().kind == egress_error_kind::refused);
    CHECK(refused.error().message().find("another origin") != std::string::npos);
  }
  CHECK(elsewhere.requests().empty());

  auto looping = client->fetch({.target = "/loop"}, within(std::chrono::seconds(5)), {});
  REQUIRE_FALSE(looping);
  CHECK(looping.error().kind == egress_error_kind::malformed);

  // A request with effects is never sent twice: its redirect is handed back as it is.
  auto posted = client->fetch({.method = "POST", .target = "/post", .body = "{}"}, within(std::chrono::seconds(5)), {});
  REQUIRE(posted);
  CHECK(posted.value().head.status == 307);
  int posts = 0;
  for (const auto& r : server.requests()) posts += r.head.starts_with("POST ");
  CHECK(posts == 1);
}

TEST_CASE("a body over the bound is too_large at once, the host's memory bounded") {
  scripted_server server([](const received_request& request, scripted_server::socket& s) {
    const std::string block(64 * 1024, 'x');
    if (request.target() == "/declared") {
      if (!scripted_server::write(s, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1073741824\r\n\r\n"))
        return;
    } else if (!scripted_server::write(s, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n")) {
      return;
    }
    const bool chunked = request.target() != "/declared";
    for (std::size_t sent = 0; sent < (std::size_t{1} << 30); sent += block.size())
      if (!scripted_server::write(s, chunked ? "10000\r\n" + block + "\r\n" : block)) return;
  });
  auto client = client_of(server.url());
  const long before = peak_rss_kib();
  for (const char* target : {"/declared", "/chunked"}) {
    CAPTURE(target);
    const auto start = clock_type::now();
    auto got = client->fetch({.target = target}, within(std::chrono::seconds(20), 1 << 20), {});
    REQUIRE_FALSE(got);
    CHECK(got.error().kind == egress_error_kind::too_large);
    CHECK(got.error().message().find("1048576") != std::string::npos);
    CHECK(seconds_since(start) < 5);
  }
  const long grown_kib = peak_rss_kib() - before;
  MESSAGE("peak RSS grew by ", grown_kib, " KiB over two 1 GiB responses");
  if (psych::testing::rss_is_meaningful) CHECK(grown_kib < 16 * 1024);
}

TEST_CASE("a drip ends at the deadline as timeout; a stop ends it as cancelled") {
  scripted_server server([](const received_request&, scripted_server::socket& s) {
    if (!scripted_server::write(s, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")) return;
    for (int i = 0; i < 60; ++i) {
      if (!scripted_server::write(s, "x")) return;
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  });
  auto client = client_of(server.url());
  auto start = clock_type::now();
  auto dripped = client->fetch({.target = "/"}, within(std::chrono::milliseconds(2500)), {});
  REQUIRE_FALSE(dripped);
  CHECK(dripped.error().kind == egress_error_kind::timeout);
  CHECK(dripped.error().sent);
  CHECK(seconds_since(start) < 3.0);
  CHECK(seconds_since(start) > 2.4);

  std::stop_source stop;
  std::jthread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop.request_stop();
  });
  start = clock_type::now();
  auto stopped = client->fetch({.target = "/"}, within(std::chrono::seconds(30)), stop.get_token());
  REQUIRE_FALSE(stopped);
  CHECK(stopped.error().kind == egress_error_kind::cancelled);
  CHECK(seconds_since(start) < 1.5);
}

TEST_CASE("a sink that has enough stops the read; the exchange still succeeds") {
  scripted_server server([](const received_request&, scripted_server::socket& s) {
    if (!scripted_server::write(s, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")) return;
    while (scripted_server::write(s, "data: tick\n\n")) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  auto client = client_of(server.url());
  std::string seen;
  auto head = client->exchange({.target = "/events"}, within(std::chrono::seconds(5), std::size_t{1} << 40), {},
                               [&](std::string_view chunk) {
                                 seen.append(chunk);
                                 return seen.size() < 100;
                               });
  REQUIRE(head);
  CHECK(head.value().status == 200);
  CHECK(seen.size() >= 100);
}

TEST_CASE("what is not HTTP, a connection cut, and a closed port are named") {
  scripted_server server([](const received_request& request, scripted_server::socket& s) {
    if (request.target() == "/garbage") scripted_server::write(s, "SSH-2.0-OpenSSH\r\n\r\n");
    if (request.target() == "/cut") scripted_server::write(s, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhalf");
    if (request.target() == "/headers") {
      std::string many = "HTTP/1.1 200 OK\r\n";
      for (int i = 0; i < 100; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
      scripted_server::write(s, many + "Content-Length: 0\r\n\r\n");
    }
  });
  auto client = client_of(server.url());
  auto garbage = client->fetch({.target = "/garbage"}, within(std::chrono::seconds(5)), {});
  REQUIRE_FALSE(garbage);
  CHECK(garbage.error().kind == egress_error_kind::malformed);
  auto cut = client->fetch({.target = "/cut"}, within(std::chrono::seconds(5)), {});
  REQUIRE_FALSE(cut);
  CHECK(cut.error().kind == egress_error_kind::connection_lost);
  CHECK(cut.error().sent);
  auto fields = client->fetch({.target = "/headers"}, within(std::chrono::seconds(5)), {});
  REQUIRE_FALSE(fields);
  CHECK(fields.error().kind == egress_error_kind::too_large);

  unsigned short closed_port = 0;
  {
    boost::asio::io_context io;
    boost::asio::ip::tcp::acceptor probe(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
    closed_port = probe.local_endpoint().port();
  }
  auto nobody = client_of("http://127.0.0.1:" + std::to_string(closed_port));
  auto refused = nobody->fetch({.target = "/"}, within(std::chrono::seconds(5)), {});
  REQUIRE_FALSE(refused);
  CHECK(refused.error().kind == egress_error_kind::unreachable);
  CHECK_FALSE(refused.error().sent);
}
