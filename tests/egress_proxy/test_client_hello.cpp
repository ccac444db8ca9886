// The ClientHello reader (src/host/egress/client_hello.hpp) against honest hellos cut anywhere and
// split over records, and hostile ones: lengths that lie, extensions that overflow, names twice.
// Whatever the bytes, it answers one of its four states and reads nothing it was not given.
#include <random>

#include <doctest/doctest.h>

#include "egress/client_hello.hpp"
#include "hello_builder.hpp"

using namespace egress_test;
using psych::host::egress::client_hello_bound;
using psych::host::egress::hello_state;
using psych::host::egress::scan_client_hello;

namespace {

void check_malformed(const std::string& bytes, std::string_view why) {
  const auto scan = scan_client_hello(bytes);
  CHECK(scan.state == hello_state::malformed);
  CHECK_MESSAGE(scan.problem.find(why) != std::string_view::npos, scan.problem);
}

/// A hello whose body is `body` exactly, lengths and all as given.
std::string raw_hello(const std::string& body) { return in_records("\x01" + prefixed(body, 3)); }

std::string hello_front() {
  return "\x03\x03" + std::string(32, 'r') + prefixed("", 1) + prefixed(std::string("\x13\x01", 2), 2) +
         prefixed(std::string(1, '\0'), 1);
}

}  // namespace

TEST_CASE("scan_client_hello: an honest ClientHello's server name, as sent") {
  const auto scan = scan_client_hello(client_hello("API.Example.test"));
  REQUIRE(scan.state == hello_state::complete);
  REQUIRE(scan.server_name);
  CHECK(*scan.server_name == "API.Example.test");
}

TEST_CASE("scan_client_hello: no server name, with and without extensions") {
  SUBCASE("extensions, none of them server_name") {
    const auto scan = scan_client_hello(client_hello(std::nullopt));
    CHECK(scan.state == hello_state::complete);
    CHECK_FALSE(scan.server_name);
  }
  SUBCASE("no extensions at all") {
    hello_parts parts;
    parts.extensions = false;
    const auto scan = scan_client_hello(in_records(hello_message(parts)));
    CHECK(scan.state == hello_state::complete);
    CHECK_FALSE(scan.server_name);
  }
  SUBCASE("a server_name list of another name type only") {
    hello_parts parts;
    parts.extra_extensions = {extension(0, prefixed("\x05" + prefixed("x", 2), 2))};
    const auto scan = scan_client_hello(in_records(hello_message(parts)));
    CHECK(scan.state == hello_state::complete);
    CHECK_FALSE(scan.server_name);
  }
}

TEST_CASE("scan_client_hello: every prefix of a ClientHello asks for more, never guesses") {
  const std::string whole = client_hello("api.example.test");
  for (std::size_t size = 1; size < whole.size(); ++size) {
    CAPTURE(size);
    CHECK(scan_client_hello(whole.substr(0, size)).state == hello_state::need_more);
  }
  CHECK(scan_client_hello("").state == hello_state::need_more);
}

TEST_CASE("scan_client_hello: a ClientHello split over records, at every point, is joined") {
  const std::string message = hello_message({.server_name = "api.example.test"});
  for (std::size_t piece = 1; piece <= message.size(); piece += (piece < 16 ? 1 : 7)) {
    CAPTURE(piece);
    const auto scan = scan_client_hello(in_records(message, piece));
    REQUIRE(scan.state == hello_state::complete);
    CHECK(scan.server_name == "api.example.test");
  }
}

TEST_CASE("scan_client_hello: bytes that are not a TLS handshake") {
  CHECK(scan_client_hello("GET / HTTP/1.1\r\n").state == hello_state::not_tls);
  CHECK(scan_client_hello("SSH-2.0-OpenSSH_9.2\r\n").state == hello_state::not_tls);
  CHECK(scan_client_hello(std::string("\x15\x03\x03\x00\x02\x02\x31", 7)).state == hello_state::not_tls);
}

TEST_CASE("scan_client_hello: records that lie or do not belong") {
  const std::string message = hello_message({.server_name = "api.example.test"});
  SUBCASE("a record longer than TLS allows") {
    check_malformed(std::string("\x16\x03\x01\x40\x01", 5) + message, "longer than TLS allows");
  }
  SUBCASE("an empty handshake record") { check_malformed(std::string("\x16\x03\x01\x00\x00", 5), "empty"); }
  SUBCASE("a record of no TLS version") { check_malformed("\x16\x07\x01" + prefixed(message, 2), "no TLS version"); }
  SUBCASE("an alert between the pieces") {
    const std::string split = in_records(message, 20);
    check_malformed(split.substr(0, 25) + std::string("\x15\x03\x03\x00\x02\x02\x31", 7) + split.substr(25),
                    "another record");
  }
  SUBCASE("another handshake message first") {
    check_malformed(in_records("\x02" + message.substr(1)), "no ClientHello");
  }
  SUBCASE("a ClientHello that claims more than one record can hold") {
    check_malformed(in_records("\x01" + big_endian(16 * 1024, 3) + std::string(100, 'x')),
                    "longer than one TLS record");
    check_malformed(in_records("\x01\xff\xff\xff" + std::string(100, 'x')), "longer than one TLS record");
  }
}

TEST_CASE("scan_client_hello: a body whose own lengths lie") {
  SUBCASE("shorter than its version and random") { check_malformed(raw_hello(std::string(20, 'x')), "shorter"); }
  SUBCASE("a session id of 33 bytes") {
    check_malformed(raw_hello("\x03\x03" + std::string(32, 'r') + prefixed(std::string(33, 's'), 1) + "rest"),
                    "session id");
  }
  SUBCASE("a session id past the end") {
    check_malformed(raw_hello("\x03\x03" + std::string(32, 'r') + "\x20" + "abc"), "session id");
  }
  SUBCASE("an odd cipher suite list") {
    check_malformed(raw_hello("\x03\x03" + std::string(32, 'r') + prefixed("", 1) + prefixed("abc", 2) +
                              prefixed(std::string(1, '\0'), 1)),
                    "cipher suites");
  }
  SUBCASE("no compression method") {
    check_malformed(
        raw_hello("\x03\x03" + std::string(32, 'r') + prefixed("", 1) + prefixed("ab", 2) + prefixed("", 1)),
        "compression");
  }
  SUBCASE("extensions longer than what is left") {
    check_malformed(raw_hello(hello_front() + big_endian(500, 2) + extension(43, "\x02\x03\x04")), "fill it exactly");
  }
  SUBCASE("extensions shorter than what is left") {
    check_malformed(raw_hello(hello_front() + prefixed(extension(43, "\x02\x03\x04"), 2) + "trailing"),
                    "fill it exactly");
  }
  SUBCASE("an extension whose length runs past the extensions' end") {
    const std::string lying = big_endian(0, 2) + big_endian(4000, 2) + "abc";
    check_malformed(raw_hello(hello_front() + prefixed(lying, 2)), "runs past");
  }
  SUBCASE("an extension header cut in half") {
    check_malformed(raw_hello(hello_front() + prefixed(std::string(1, '\0'), 2)), "runs past");
  }
}

TEST_CASE("scan_client_hello: server names that lie or repeat") {
  const auto hello_with = [](const std::string& extensions) {
    return raw_hello(hello_front() + prefixed(extensions, 2));
  };
  SUBCASE("a list length that disagrees with the extension") {
    check_malformed(hello_with(extension(0, big_endian(50, 2) + '\0' + prefixed("a.test", 2))), "does not fill");
    check_malformed(hello_with(extension(0, big_endian(2, 2) + '\0' + prefixed("a.test", 2))), "does not fill");
  }
  SUBCASE("an empty list, or an empty extension") {
    check_malformed(hello_with(extension(0, prefixed("", 2))), "does not fill");
    check_malformed(hello_with(extension(0, "")), "does not fill");
  }
  SUBCASE("a name whose length runs past the list") {
    check_malformed(hello_with(extension(0, prefixed(std::string("\0", 1) + big_endian(90, 2) + "a.test", 2))),
                    "runs past its list");
  }
  SUBCASE("two host names in one extension") {
    check_malformed(hello_with(extension(0, server_names({"a.test", "b.test"}))), "two host names");
  }
  SUBCASE("two server_name extensions") {
    check_malformed(hello_with(extension(0, server_names({"a.test"})) + extension(0, server_names({"b.test"}))),
                    "two server_name");
  }
  SUBCASE("an empty host name") { check_malformed(hello_with(extension(0, server_names({""}))), "empty server name"); }
}

TEST_CASE("scan_client_hello: random damage never reads past the bytes or hangs") {
  std::mt19937 random(20240601);
  const std::string honest = client_hello("api.example.test");
  for (int round = 0; round < 20000; ++round) {
    std::string bytes = honest;
    const int hits = 1 + static_cast<int>(random() % 4);
    for (int i = 0; i < hits; ++i) bytes[random() % bytes.size()] = static_cast<char>(random() & 0xff);
    if (random() % 3 == 0) bytes.resize(random() % bytes.size());
    const auto scan = scan_client_hello(bytes);
    if (scan.state == hello_state::complete && scan.server_name) CHECK(scan.server_name->size() < bytes.size());
  }
  for (int round = 0; round < 2000; ++round) {
    std::string garbage(1 + random() % 600, '\0');
    for (auto& c : garbage) c = static_cast<char>(random() & 0xff);
    garbage[0] = '\x16';
    (void)scan_client_hello(garbage);
  }
  CHECK(client_hello_bound == 16 * 1024 + 5);
}
