#include <doctest/doctest.h>

#include <string>

#include "psych/attachment.hpp"
#include "psych/capture.hpp"
#include "psych/preview.hpp"

using namespace psych;

TEST_CASE("previews are deterministic head and tail") {
  std::string data;
  for (int i = 0; i < 1000; ++i) data += "line " + std::to_string(i) + "\n";
  const auto a = make_preview(data, data.size(), 300);
  CHECK(a == make_preview(data, data.size(), 300));
  CHECK(a.starts_with("line 0\n"));
  CHECK(a.ends_with("line 999\n"));
  CHECK(a.find("bytes omitted") != std::string::npos);
  CHECK(a.size() < 400);
}

TEST_CASE("a small stream is its own preview") {
  CHECK(make_preview("hello\n", 6, 100) == "hello\n");
}

TEST_CASE("the cut never splits a UTF-8 character") {
  std::string data;
  for (int i = 0; i < 500; ++i) data += "é€😀";  // 2, 3 and 4 byte characters
  for (std::uint64_t budget = 10; budget < 60; ++budget) {
    const auto p = make_preview(data, data.size(), budget);
    CHECK(utf8::sanitize(p) == p);  // valid as is: nothing needed replacing
  }
}

TEST_CASE("invalid bytes become U+FFFD in the preview, never in the data") {
  const std::string bad = "ok \xff\xfe end";
  CHECK(make_preview(bad, bad.size(), 100) == "ok \xEF\xBF\xBD\xEF\xBF\xBD end");
  CHECK(utf8::sanitize("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // an encoded surrogate
}

TEST_CASE("the preview says how much was never captured") {
  const std::string captured(100, 'x');
  const auto p = make_preview(captured, 1'000'000, 50);
  CHECK(p.find("never captured") != std::string::npos);
  CHECK(p.find("999900") != std::string::npos);
}

TEST_CASE("capture keeps at most max_bytes and counts everything") {
  stream_capture c(10);
  c.append("hello ");
  c.append("world, and more");
  CHECK(c.data() == "hello worl");
  CHECK(c.produced() == 21);
  CHECK(c.truncated());
}

TEST_CASE("attachments: where an item goes follows its sizes, the policy and whether a store is wired") {
  const psych::output_policy lenient{.preview_bytes = 10, .max_bytes = 100};
  auto strict = lenient;
  strict.preserve = psych::output_preservation::required;
  using psych::placement;
  CHECK(psych::place(10, 10, lenient, false) == placement::inline_bytes);
  CHECK(psych::place(10, 10, strict, false) == placement::inline_bytes);  // nothing to preserve
  CHECK(psych::place(11, 11, lenient, true) == placement::store);
  CHECK(psych::place(11, 11, lenient, false) == placement::preview_only);
  CHECK(psych::place(11, 11, strict, false) == placement::refuse);
  CHECK(psych::place(5, 500, lenient, false) == placement::preview_only);  // small capture, large production
}

TEST_CASE("attachments: a preview-only item says how many bytes were let go, and the preview is the same every time") {
  const psych::output_policy policy{.preview_bytes = 30};
  std::string text;
  for (int i = 0; i < 50; ++i) text += "\xE2\x82\xAC";  // 150 bytes of 3-byte characters
  const auto a = psych::describe_item("stdout", "text/plain", text, 400, policy);
  const auto b = psych::describe_item("stdout", "text/plain", text, 400, policy);
  CHECK(a == b);
  CHECK(a.truncated);
  CHECK(a.size_bytes == 400);
  CHECK(a.location == psych::attachment_location::preview_only);
  const auto kept = psych::cut_preview(text, 400, 30).kept_bytes;
  CHECK(kept % 3 == 0);  // whole characters only
  CHECK(kept <= 30);
  CHECK(a.bytes_let_go == 400 - kept);
  const auto whole = psych::describe_item("value", "application/json", "[1,2]", 5, policy);
  CHECK(whole.location == psych::attachment_location::inline_bytes);
  CHECK(whole.bytes_let_go == 0);
  CHECK(whole.preview == "[1,2]");
}
