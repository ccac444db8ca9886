// The allowlist's host patterns (include/psych/host_pattern.hpp): what parses, what each allows,
// and what two lists share.
#include <doctest/doctest.h>

#include "psych/host_pattern.hpp"

namespace {

using psych::canonicalize_host;
using psych::host_pattern;
using psych::parse_host_pattern;

host_pattern pattern(std::string_view text) {
  auto parsed = parse_host_pattern(text);
  INFO(text);
  REQUIRE(parsed.has_value());
  return parsed.value();
}

bool allowed(std::string_view pattern_text, std::string_view host, std::uint16_t port) {
  const auto canonical = canonicalize_host(host);
  REQUIRE(canonical);
  return psych::allows(pattern(pattern_text), *canonical, port);
}

std::vector<std::string> spelled(const std::vector<host_pattern>& patterns) {
  std::vector<std::string> out;
  for (const auto& p : patterns) out.push_back(psych::to_string(p));
  return out;
}

std::vector<host_pattern> list(std::initializer_list<std::string_view> texts) {
  std::vector<host_pattern> out;
  for (const auto text : texts) out.push_back(pattern(text));
  return out;
}

}  // namespace

TEST_CASE("host patterns parse to one canonical spelling") {
  CHECK(psych::to_string(pattern("API.Example.COM.")) == "api.example.com");
  CHECK(psych::to_string(pattern("*.example.com:8443")) == "*.example.com:8443");
  CHECK(psych::to_string(pattern("192.0.2.7:443")) == "192.0.2.7:443");
  CHECK(psych::to_string(pattern("[2001:DB8:0:0:0:0:0:1]:443")) == "[2001:db8::1]:443");
  CHECK(psych::to_string(pattern("[::ffff:192.0.2.1]")) == "[::ffff:192.0.2.1]");
  CHECK(psych::to_string(pattern("[::FFFF:c000:0201]")) == "[::ffff:192.0.2.1]");
  CHECK(psych::to_string(pattern("[fd00::]")) == "[fd00::]");
  CHECK(psych::to_string(pattern("[1:0:0:2:0:0:0:3]")) == "[1:0:0:2::3]");
  CHECK(pattern("example.com").port == std::nullopt);
}

TEST_CASE("host patterns that would read wider than they look are refused, naming the pattern") {
  for (const auto text : {"", "*", "*.com", "*example.com", "a.*.example.com", "example.*", "http://example.com",
                          "example.com/path", "user@example.com", "example.com:0", "example.com:65536",
                          "example.com:", "2001:db8::1", "[2001:db8::1", "[2001:db8::1]x", "*.192.0.2.7",
                          "exa mple.com", "-example.com", "example-.com", "010.0.0.1", "256.0.0.1",
                          "[fe80::1%eth0]", "123", "[1::2::3]", "[1:2:3:4:5:6:7:8:9]"}) {
    INFO(text);
    const auto parsed = parse_host_pattern(text);
    REQUIRE_FALSE(parsed.has_value());
    CHECK(parsed.error().kind == psych::error_kind::invalid_argument);
    CHECK(parsed.error().detail.find(std::string("\"") + text + "\"") != std::string::npos);
  }
}

TEST_CASE("a pattern allows what it reads and no more") {
  SUBCASE("an exact name, at 80 and 443 without a port") {
    CHECK(allowed("api.example.com", "API.example.com.", 443));
    CHECK(allowed("api.example.com", "api.example.com", 80));
    CHECK_FALSE(allowed("api.example.com", "api.example.com", 22));
    CHECK_FALSE(allowed("api.example.com", "x.api.example.com", 443));
    CHECK_FALSE(allowed("api.example.com", "example.com", 443));
    CHECK_FALSE(allowed("api.example.com", "api.example.com.evil.test", 443));
  }
  SUBCASE("a wildcard: names under it at any depth, never the name itself") {
    CHECK(allowed("*.example.com", "a.example.com", 443));
    CHECK(allowed("*.example.com", "a.b.example.com", 443));
    CHECK_FALSE(allowed("*.example.com", "example.com", 443));
    CHECK_FALSE(allowed("*.example.com", "badexample.com", 443));
    CHECK_FALSE(allowed("*.example.com", "example.com.evil.test", 443));
  }
  SUBCASE("a port narrows to that port alone") {
    CHECK(allowed("example.com:8443", "example.com", 8443));
    CHECK_FALSE(allowed("example.com:8443", "example.com", 443));
  }
  SUBCASE("an address only by itself, a name never by its address") {
    CHECK(allowed("192.0.2.7", "192.0.2.7", 443));
    CHECK(allowed("[2001:db8::1]", "[2001:0db8:0::1]", 443));
    CHECK_FALSE(allowed("example.com", "192.0.2.7", 443));
    CHECK_FALSE(allowed("192.0.2.7", "192.0.2.8", 443));
  }
  CHECK_FALSE(canonicalize_host("exa_mple.com"));
  CHECK_FALSE(canonicalize_host("[not-an-address]"));
}

TEST_CASE("two lists share the narrower of each pair, and nothing else") {
  CHECK(spelled(psych::intersect(list({"*.example.com"}), list({"api.example.com"}))) ==
        std::vector<std::string>{"api.example.com"});
  CHECK(spelled(psych::intersect(list({"*.example.com"}), list({"*.eu.example.com"}))) ==
        std::vector<std::string>{"*.eu.example.com"});
  CHECK(spelled(psych::intersect(list({"example.com"}), list({"example.com:443"}))) ==
        std::vector<std::string>{"example.com:443"});
  CHECK(psych::intersect(list({"example.com"}), list({"example.com:22"})).empty());
  CHECK(psych::intersect(list({"example.com:8443"}), list({"example.com:9443"})).empty());
  CHECK(psych::intersect(list({"*.example.com"}), list({"example.com"})).empty());
  CHECK(psych::intersect(list({"*.example.com"}), list({"*.example.org"})).empty());
  CHECK(psych::intersect(list({"192.0.2.7"}), list({"*.example.com"})).empty());
  // A result member that another already covers is dropped.
  CHECK(spelled(psych::intersect(list({"*.example.com", "api.example.com"}), list({"*.example.com"}))) ==
        std::vector<std::string>{"*.example.com"});
  CHECK(spelled(psych::intersect(list({"a.test", "b.test", "c.test"}), list({"c.test", "a.test"}))) ==
        std::vector<std::string>{"a.test", "c.test"});
}

TEST_CASE("a list is within a cap only when each of its patterns is wholly within it") {
  const std::vector<std::string> cap{"*.example.com", "other.test:8443"};
  CHECK_FALSE(psych::first_host_beyond({"api.example.com", "*.eu.example.com", "other.test:8443"}, cap));
  // Covered by a wider member of the same list does not excuse one beyond the cap.
  CHECK_FALSE(psych::first_host_beyond({"*.example.com", "x.example.com"}, cap));
  CHECK(psych::first_host_beyond({"api.example.com", "example.com"}, cap) == "example.com");
  CHECK(psych::first_host_beyond({"other.test"}, cap) == "other.test");  // 80 and 443 are not 8443
  CHECK(psych::first_host_beyond({"*.com"}, cap) == "*.com");            // does not parse
}
