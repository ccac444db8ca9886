#include <doctest/doctest.h>
#include <fmt/format.h>

#include <string>
#include <string_view>

#include "psych/terminal_text.hpp"
#include "terminal_checks.hpp"

using namespace psych;
using psych::testing::terminal_control_in;

namespace {

/// The escaped text, checked to hold nothing a terminal would obey.
std::string shown(std::string_view text) {
  auto out = terminal_text(text);
  CHECK_MESSAGE(terminal_control_in(out).empty(), terminal_control_in(out));
  return out;
}

}  // namespace

TEST_CASE("escape sequences a program prints are spelled out, not sent") {
  SUBCASE("OSC 52 writes the clipboard") {
    CHECK(shown("\x1b]52;c;aGVsbG8=\x07") == "\\x1b]52;c;aGVsbG8=\\x07");
  }
  SUBCASE("OSC 0 sets the window title") {
    CHECK(shown("\x1b]0;owned\x07") == "\\x1b]0;owned\\x07");
  }
  SUBCASE("OSC 8 plants a hyperlink (ST-terminated)") {
    CHECK(shown("\x1b]8;;http://example.invalid/\x1b\\click\x1b]8;;\x1b\\") ==
          "\\x1b]8;;http://example.invalid/\\x1b\\click\\x1b]8;;\\x1b\\");
  }
  SUBCASE("CSI 2J clears the screen") { CHECK(shown("\x1b[2J\x1b[H") == "\\x1b[2J\\x1b[H"); }
  SUBCASE("BEL, backspace and carriage return") {
    CHECK(shown("ding\x07") == "ding\\x07");
    CHECK(shown("secret\x08\x08\x08\x08\x08\x08public") == "secret\\x08\\x08\\x08\\x08\\x08\\x08public");
    CHECK(shown("progress 10%\rdone") == "progress 10%\\rdone");
  }
  SUBCASE("the 8-bit CSI U+009B, encoded in UTF-8 as C2 9B") { CHECK(shown("\xc2\x9b" "2J") == "\\x9b2J"); }
  SUBCASE("the raw byte 0x9b, which is not UTF-8") { CHECK(shown("\x9b" "2J") == "\\x9b2J"); }
}

TEST_CASE("every C0 control but newline and tab, DEL and every C1 code point is escaped") {
  for (unsigned c = 0; c < 0x20; ++c) {
    const std::string one(1, static_cast<char>(c));
    if (c == '\n' || c == '\t') CHECK(shown(one) == one);
    else CHECK(shown(one).starts_with("\\"));
  }
  CHECK(shown(std::string(1, '\0')) == "\\x00");
  CHECK(shown("\x7f") == "\\x7f");
  for (unsigned c = 0x80; c < 0xA0; ++c) {
    const std::string encoded{'\xc2', static_cast<char>(c)};
    CHECK(shown(encoded) == fmt::format("\\x{:02x}", c));
  }
}

TEST_CASE("printable text is unchanged, newlines and tabs included") {
  CHECK(shown("") == "");
  CHECK(shown("line one\n\tindented\n") == "line one\n\tindented\n");
  CHECK(shown("C:\\path\\file [1;31m") == "C:\\path\\file [1;31m");
  CHECK(shown("\xc2\xa0nbsp, é, € and 😀") == "\xc2\xa0nbsp, é, € and 😀");  // U+00A0 is the first non-C1
}

TEST_CASE("bytes outside valid UTF-8 are escaped one by one") {
  CHECK(shown("\xff") == "\\xff");
  CHECK(shown("a\xe2\x82") == "a\\xe2\\x82");             // truncated three-byte sequence
  CHECK(shown("\xc0\x80") == "\\xc0\\x80");               // overlong NUL
  CHECK(shown("\xed\xa0\x80") == "\\xed\\xa0\\x80");      // a surrogate
  CHECK(shown("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  CHECK(shown("\xc2\x1b[2J") == "\\xc2\\x1b[2J");         // a broken lead cannot swallow ESC
}

TEST_CASE("no input of up to two bytes yields anything a terminal would obey") {
  for (unsigned a = 0; a < 256; ++a)
    for (unsigned b = 0; b < 256; ++b) {
      const std::string input{static_cast<char>(a), static_cast<char>(b)};
      const auto out = terminal_text(input);
      if (!terminal_control_in(out).empty()) FAIL_CHECK("input " << a << "," << b << ": " << terminal_control_in(out));
    }
}
