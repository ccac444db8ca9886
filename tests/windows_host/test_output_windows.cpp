// psych's host on Windows, its pure side that differs by build: SHA-256 on CNG (sha256.cpp, in
// place of OpenSSL's), the secret compare without CRYPTO_memcmp (same_secret.hpp), and
// read_tool_output's pattern engine (line_pattern.hpp), which a build
// without RE2 for Windows (PSYCH_WITHOUT_RE2: the cross build, as Debian has none) refuses by name.
// Part of psych-windows-host-parts-tests.exe.
#include <doctest/doctest.h>

#include <string>

#include "psych/host/output_reader.hpp"
#include "os/same_secret.hpp"
#include "os/sha256.hpp"

using namespace psych;

TEST_CASE("sha256_hex on CNG gives the standard digests, also of input read in pieces") {
  const auto empty = host::sha256_hex("");
  REQUIRE(empty);
  CHECK(empty.value() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const auto abc = host::sha256_hex("abc");
  REQUIRE(abc);
  CHECK(abc.value() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // FIPS 180-2's long example: a million 'a's.
  const auto million = host::sha256_hex(std::string(1'000'000, 'a'));
  REQUIRE(million);
  CHECK(million.value() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("same_secret without OpenSSL: equal only when every byte is, whatever the length") {
  const std::string secret = "0123456789abcdef0123456789abcdef";
  CHECK(host::same_secret(secret, secret));
  for (const std::size_t at : {std::size_t{0}, std::size_t{15}, secret.size() - 1}) {
    auto off = secret;
    off[at] = 'x';
    CHECK_FALSE(host::same_secret(off, secret));
  }
  CHECK_FALSE(host::same_secret(secret.substr(1), secret));
  CHECK_FALSE(host::same_secret(secret + "0", secret));
  CHECK_FALSE(host::same_secret("", secret));
  CHECK(host::same_secret("", ""));
}

TEST_CASE("read_tool_output without a pattern reads its window in every build") {
  const auto window = read_output("first\nsecond\nthird\n", {.offset = 1, .limit = 1}, {});
  REQUIRE(window);
  REQUIRE(window.value().lines.size() == 1);
  CHECK(window.value().lines[0].number == 1);
  CHECK(window.value().lines[0].text == "second");
  CHECK(window.value().total_lines == 3);
  CHECK(window.value().next_offset == 2);
}

TEST_CASE("read_tool_output's patterns: RE2 where the build has it, a named refusal where it has none") {
  const auto found = read_output("apple\nbanana\navocado\n", {.limit = 10, .pattern = "^a"}, {});
#ifdef PSYCH_WITHOUT_RE2
  REQUIRE_FALSE(found);
  CHECK(found.error().kind == error_kind::output_pattern_rejected);
  CHECK(found.error().message().find("built without RE2") != std::string::npos);
  // The length bound is checked first, the same in every build.
  const auto long_pattern = read_output("x\n", {.pattern = std::string(2000, 'a')}, {});
  REQUIRE_FALSE(long_pattern);
  CHECK(long_pattern.error().message().find("too long") != std::string::npos);
#else
  REQUIRE(found);
  REQUIRE(found.value().lines.size() == 2);
  CHECK(found.value().lines[0].text == "apple");
  CHECK(found.value().lines[1].text == "avocado");
#endif
}
