// The macOS launcher's seatbelt profile (launchers/macos/seatbelt_profile.hpp), a pure function
// compiled and checked here on every platform: what it allows and denies, and that no path can
// leave its string literal, however it is spelled.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "seatbelt_profile.hpp"

using namespace psych::launcher;

namespace {

seatbelt_terms plain_terms() {
  return {.workspace = "/private/tmp/psych-a/workspace",
          .tmp_dir = "/private/tmp/psych-a/tmp",
          .read_denied = {"/Users", "/private/tmp"},
          .read_reopened = {},
          .network = false};
}

std::string profile_of(const seatbelt_terms& terms) {
  auto profile = seatbelt_profile(terms);
  REQUIRE(profile);
  return profile.value();
}

/// The profile read as SBPL's reader reads it: the contents of every string literal (escapes
/// undone), in order, or nullopt when a literal never ends or a parenthesis outside them does not
/// balance. A path that broke out of its literal shows up here as a string that is not the path.
std::optional<std::vector<std::string>> string_literals(const std::string& profile) {
  std::vector<std::string> literals;
  int depth = 0;
  for (std::size_t i = 0; i < profile.size(); ++i) {
    const char c = profile[i];
    if (c == '(') ++depth;
    if (c == ')' && --depth < 0) return std::nullopt;
    if (c != '"') continue;
    std::string text;
    for (++i;; ++i) {
      if (i >= profile.size()) return std::nullopt;
      if (profile[i] == '"') break;
      if (profile[i] == '\\') {
        if (++i >= profile.size()) return std::nullopt;
      }
      text.push_back(profile[i]);
    }
    literals.push_back(std::move(text));
  }
  if (depth != 0) return std::nullopt;
  return literals;
}

}  // namespace

TEST_CASE("the profile allows by default and narrows reads, writes and the network") {
  const auto profile = profile_of(plain_terms());
  CHECK(profile.starts_with("(version 1)\n(allow default)\n"));
  CHECK(profile.find("(deny file-read*\n  (subpath \"/Users\")\n  (subpath \"/private/tmp\"))") != std::string::npos);
  CHECK(profile.find("(deny file-write*)") != std::string::npos);
  CHECK(profile.find("(allow file-read* file-write*\n  (subpath \"/private/tmp/psych-a/workspace\")\n"
                     "  (subpath \"/private/tmp/psych-a/tmp\"))") != std::string::npos);
  CHECK(profile.find("(deny network*)") != std::string::npos);

  SUBCASE("the workspace is opened after the denials that cover it: the last matching rule decides") {
    CHECK(profile.find("(deny file-read*") < profile.find("(allow file-read* file-write*"));
    CHECK(profile.find("(deny file-write*)") < profile.find("(allow file-read* file-write*"));
  }
  SUBCASE("a network grant leaves the network alone") {
    auto terms = plain_terms();
    terms.network = true;
    CHECK(profile_of(terms).find("network") == std::string::npos);
  }
  SUBCASE("reopened subtrees follow the denials") {
    auto terms = plain_terms();
    terms.read_reopened = {"/Users/worker/.pyenv/versions/3.12.1"};
    const auto reopened = profile_of(terms);
    const auto allow = reopened.find("(allow file-read*\n  (subpath \"/Users/worker/.pyenv/versions/3.12.1\"))");
    REQUIRE(allow != std::string::npos);
    CHECK(reopened.find("(deny file-read*") < allow);
  }
  SUBCASE("nothing denied, no denial") {
    auto terms = plain_terms();
    terms.read_denied.clear();
    CHECK(profile_of(terms).find("(deny file-read*") == std::string::npos);
  }
}

TEST_CASE("every path stays inside its string literal") {
  const std::vector<std::string> hostile = {
      R"(/tmp/a"b)",
      R"(/tmp/a\b)",
      R"(/tmp/a\")",
      R"(/tmp/a\\"))",
      R"(/tmp/x") (allow file-write* (subpath "/)",
      R"(/tmp/x\") (allow network*) (deny file-read* (literal "/x)",
      R"(/tmp/;comment)",
      R"(/tmp/#|block|#)",
      "/tmp/\xc3\xa9t\xc3\xa9",  // UTF-8 passes through as it is
      R"(/tmp/trailing\)",
  };
  for (const auto& path : hostile) {
    CAPTURE(path);
    auto terms = plain_terms();
    terms.workspace = path;
    terms.read_denied = {path, "/Users"};
    terms.read_reopened = {path};
    const auto literals = string_literals(profile_of(terms));
    REQUIRE(literals);
    // In order: the denials, the reopened path, the workspace and the temp dir, the two devices.
    const std::vector<std::string> expected = {path, "/Users", path, path, "/private/tmp/psych-a/tmp", "/dev/null",
                                               "/dev/zero"};
    CHECK(*literals == expected);
  }
}

TEST_CASE("a path that is not absolute, or holds a control character, is refused, not escaped") {
  for (const std::string& path : {std::string("relative/dir"), std::string(), std::string("/tmp/a\nb"),
                                 std::string("/tmp/a\rb"), std::string("/tmp/a\tb"), std::string("/tmp/a\x7f"),
                                 std::string("/tmp/a\0b", 8), std::string("/tmp/x\")\n(allow network*)\n;")}) {
    CAPTURE(path);
    auto terms = plain_terms();
    terms.tmp_dir = path;
    const auto profile = seatbelt_profile(terms);
    REQUIRE_FALSE(profile);
    CHECK(profile.error().stage == launch_stage::seatbelt);
    const auto alone = sbpl_string(path);
    REQUIRE_FALSE(alone);
    CHECK(alone.error().stage == launch_stage::seatbelt);
  }
}

TEST_CASE("sbpl_string escapes exactly the quote and the backslash") {
  CHECK(sbpl_string("/plain/path").value() == "\"/plain/path\"");
  CHECK(sbpl_string(R"(/a"b)").value() == R"("/a\"b")");
  CHECK(sbpl_string(R"(/a\b)").value() == R"("/a\\b")");
  CHECK(sbpl_string(R"(/a\"b)").value() == R"("/a\\\"b")");
}
