#include <doctest/doctest.h>

#include <string>

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
