// The proxy's rules for a request head (src/host/egress/proxy_request.hpp), apart from any I/O: its
// two forms and everything else refused by name, the Host header held to the URL, the allowlist,
// and the head a plain request is sent on with.
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <doctest/doctest.h>

#include "egress/proxy_request.hpp"

namespace http = boost::beast::http;
using namespace psych::host::egress;
using psych::host::proxy_error;

namespace {

http::request_header<> head_of(std::string_view text) {
  http::request_parser<http::empty_body> parser;
  parser.header_limit(64 * 1024);
  boost::system::error_code ec;
  parser.put(boost::asio::buffer(text.data(), text.size()), ec);
  REQUIRE_MESSAGE(!ec, ec.message());
  REQUIRE(parser.is_header_done());
  return parser.get().base();
}

proxy_target target_of(std::string_view text) {
  auto target = read_target(head_of(text));
  REQUIRE_MESSAGE(target, (target ? "" : target.error().detail));
  return target.value();
}

void check_refused(std::string_view text, unsigned status, std::string_view why,
                   proxy_error error = proxy_error::http_request_error) {
  CAPTURE(text);
  const auto target = read_target(head_of(text));
  REQUIRE_FALSE(target);
  CHECK(target.error().status == status);
  CHECK(target.error().error == error);
  CHECK_MESSAGE(target.error().detail.find(why) != std::string::npos, target.error().detail);
}

std::vector<psych::host_pattern> allowlist_of(std::initializer_list<const char*> texts) {
  std::vector<psych::host_pattern> out;
  for (const char* text : texts) out.push_back(psych::parse_host_pattern(text).value());
  return out;
}

}  // namespace

TEST_CASE("read_target: CONNECT host:port, canonical") {
  const auto target = target_of("CONNECT API.Example.test.:443 HTTP/1.1\r\nHost: API.Example.test:443\r\n\r\n");
  CHECK(target.tunnel);
  CHECK(target.host.host == "api.example.test");
  CHECK_FALSE(target.host.ip_literal);
  CHECK(target.port == 443);
  CHECK(target.authority() == "api.example.test:443");
  const auto v6 = target_of("CONNECT [2001:DB8:0::1]:8443 HTTP/1.0\r\n\r\n");
  CHECK(v6.host.host == "2001:db8::1");
  CHECK(v6.host.ip_literal);
  CHECK(v6.authority() == "[2001:db8::1]:8443");
}

TEST_CASE("read_target: a plain request in absolute-form, its path and query kept") {
  const auto target = target_of("GET http://API.example.test./v1/items?q=1 HTTP/1.1\r\nHost: api.example.TEST\r\n\r\n");
  CHECK_FALSE(target.tunnel);
  CHECK(target.host.host == "api.example.test");
  CHECK(target.port == 80);
  CHECK(target.origin_form == "/v1/items?q=1");
  CHECK(target_of("GET http://a.test:8080 HTTP/1.1\r\nHost: a.test:8080\r\n\r\n").origin_form == "/");
  CHECK(target_of("GET HTTP://a.test?x=1 HTTP/1.1\r\nHost: a.test:80\r\n\r\n").origin_form == "/?x=1");
  CHECK(
      target_of("POST http://[2001:db8::1]/p HTTP/1.0\r\nHost: [2001:db8::1]\r\nContent-Length: 0\r\n\r\n").host.host ==
      "2001:db8::1");
}

TEST_CASE("read_target: the Host header must name the URL's host and port") {
  check_refused("GET http://a.test/ HTTP/1.1\r\n\r\n", 400, "exactly one Host");
  check_refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nHost: a.test\r\n\r\n", 400, "exactly one Host");
  check_refused("GET http://a.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n", 403, "names b.test, the URL a.test:80",
                proxy_error::http_request_denied);
  check_refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test:8080\r\n\r\n", 403, "the URL a.test:80",
                proxy_error::http_request_denied);
  check_refused("GET http://a.test:8080/ HTTP/1.1\r\nHost: a.test\r\n\r\n", 403, "the URL a.test:8080",
                proxy_error::http_request_denied);
  check_refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test/x\r\n\r\n", 400, "is not host[:port]");
}

TEST_CASE("read_target: what is neither of the two forms is refused with 400, saying what a proxy is asked") {
  struct refused_head {
    const char* head;
    const char* why;
  };
  const refused_head cases[] = {
      {"CONNECT api.example.test HTTP/1.1\r\n\r\n", "host:port"},
      {"CONNECT *.example.test:443 HTTP/1.1\r\n\r\n", "host:port"},
      {"CONNECT api.example.test:0 HTTP/1.1\r\n\r\n", "host:port"},
      {"CONNECT 2001:db8::1:443 HTTP/1.1\r\n\r\n", "host:port"},
      {"CONNECT a.test:443 HTTP/1.1\r\nContent-Length: 5\r\n\r\n", "no body"},
      {"CONNECT a.test:443 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", "no body"},
      {"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", "origin-form"},
      {"GET https://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "by CONNECT"},
      {"GET ftp://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "neither CONNECT nor"},
      {"OPTIONS * HTTP/1.1\r\nHost: a.test\r\n\r\n", "neither CONNECT nor"},
      {"GET http://user:pw@a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "user information"},
      {"GET http://a.test/#frag HTTP/1.1\r\nHost: a.test\r\n\r\n", "fragment"},
      {"GET http://a%2etest/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "is not host[:port]"},
  };
  for (const auto& [head, why] : cases) check_refused(head, 400, why);
}

TEST_CASE("read_target: a body framed any way but Content-Length or chunked alone is refused") {
  check_refused("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 400,
                "other than chunked");
  check_refused("POST http://a.test/ HTTP/1.0\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "HTTP/1.0");
  CHECK(target_of("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: Chunked\r\n\r\n").port == 80);
}

TEST_CASE("read_target: a head of too many fields is refused with 431") {
  std::string head = "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n";
  for (std::size_t i = 0; i < max_request_fields; ++i) head += "X-F" + std::to_string(i) + ": v\r\n";
  check_refused(head + "\r\n", 431, "more than 100 fields");
}

TEST_CASE("asked_authority: a target's destination for the meters, never its path, query or credential") {
  CHECK(asked_authority("https://user:secret@api.example.test:8443/v1?key=secret") == "api.example.test:8443");
  CHECK(asked_authority("ftp://files.example.test/pub") == "files.example.test");
  CHECK(asked_authority("api.example.test") == "api.example.test");
  CHECK(asked_authority("/path?token=secret").empty());
  CHECK(asked_authority("*") == "*");
  CHECK(asked_authority(std::string(300, 'a') + "\x01") == std::string(100, 'a'));
}

TEST_CASE("check_allowed: names by the allowlist, addresses only by their own literal") {
  const auto allowed = allowlist_of({"api.example.test", "*.cdn.test:8443", "192.0.2.7:443", "[2001:db8::1]"});
  const auto check = [&](std::string_view head, bool expected) {
    CAPTURE(head);
    const auto result = check_allowed(target_of(head), allowed);
    CHECK(static_cast<bool>(result) == expected);
    if (!result) {
      CHECK(result.error().status == 403);
      CHECK(result.error().error == proxy_error::http_request_denied);
      CHECK(result.error().detail.find("is not on the allowlist") != std::string::npos);
    }
  };
  check("CONNECT api.example.test:443 HTTP/1.1\r\n\r\n", true);
  check("CONNECT api.example.test:22 HTTP/1.1\r\n\r\n", false);
  check("CONNECT evil.test:443 HTTP/1.1\r\n\r\n", false);
  check("CONNECT img.cdn.test:8443 HTTP/1.1\r\n\r\n", true);
  check("CONNECT cdn.test:8443 HTTP/1.1\r\n\r\n", false);
  check("CONNECT 192.0.2.7:443 HTTP/1.1\r\n\r\n", true);
  check("CONNECT 192.0.2.8:443 HTTP/1.1\r\n\r\n", false);
  check("CONNECT [2001:db8:0:0::1]:443 HTTP/1.1\r\n\r\n", true);
  check("CONNECT [2001:db8::2]:443 HTTP/1.1\r\n\r\n", false);
  check("GET http://api.example.test/ HTTP/1.1\r\nHost: api.example.test\r\n\r\n", true);
  const auto refused = check_allowed(target_of("CONNECT [2001:db8::2]:443 HTTP/1.1\r\n\r\n"), allowed);
  CHECK(refused.error().detail == "[2001:db8::2]:443 is not on the allowlist");
}

TEST_CASE("upstream_head: origin-form, hop-by-hop and Proxy-* fields gone, framing restated, Connection: close") {
  const auto head = head_of(
      "POST http://a.test/submit?x=1 HTTP/1.1\r\nHost: a.test\r\nUser-Agent: t/1\r\nProxy-Authorization: Basic "
      "c2VjcmV0\r\n"
      "Proxy-Connection: keep-alive\r\nConnection: keep-alive, X-Hop\r\nX-Hop: private\r\nKeep-Alive: timeout=5\r\n"
      "TE: trailers\r\nUpgrade: websocket\r\nExpect: 100-continue\r\nContent-Length: 5\r\nX-End: kept\r\n\r\n");
  const auto target = read_target(head).value();
  const std::string sent = upstream_head(head, target, {.chunked = false, .content_length = 5});
  CHECK(sent ==
        "POST /submit?x=1 HTTP/1.1\r\nHost: a.test\r\nUser-Agent: t/1\r\nExpect: 100-continue\r\nX-End: kept\r\n"
        "Content-Length: 5\r\nConnection: close\r\n\r\n");
  const auto chunked = head_of("PUT http://a.test/ HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n");
  CHECK(upstream_head(chunked, read_target(chunked).value(), {.chunked = true}) ==
        "PUT / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
  const auto old = head_of("GET http://a.test/ HTTP/1.0\r\nHost: a.test\r\n\r\n");
  CHECK(upstream_head(old, read_target(old).value(), {}) ==
        "GET / HTTP/1.0\r\nHost: a.test\r\nConnection: close\r\n\r\n");
}
