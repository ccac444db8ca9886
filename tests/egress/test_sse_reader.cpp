// text/event-stream as the standard reads it, fed whole and byte by byte, and bounded.
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "http/sse_reader.hpp"

using namespace psych::host;

namespace {

std::vector<sse_event> read_all(std::string_view stream, std::size_t step, std::size_t bound = 1 << 20) {
  sse_reader reader(bound);
  std::vector<sse_event> events;
  for (std::size_t at = 0; at < stream.size(); at += step) {
    auto fed = reader.feed(stream.substr(at, step), [&](sse_event&& e) { events.push_back(std::move(e)); });
    REQUIRE_MESSAGE(fed, (fed ? "" : fed.error().message()));
  }
  return events;
}

}  // namespace

TEST_CASE("events, whatever the line endings and however the bytes are cut") {
  const std::string stream =
      "\xEF\xBB\xBF: a comment\r\n"
      "event: message\r\nid: 7\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n"
      "data:no space\rretry: 100\r\r"
      "data\n\n"
      "unknown: x\nevent: custom\ndata: two words \n\n"
      "event: ignored without data\n\n";
  for (const std::size_t step : {stream.size(), std::size_t{1}, std::size_t{3}}) {
    CAPTURE(step);
    const auto events = read_all(stream, step);
    REQUIRE(events.size() == 4);
    CHECK(events[0].event == "message");
    CHECK(events[0].id == "7");
    CHECK(events[0].data == "{\"a\":\n1}");
    CHECK(events[1].data == "no space");
    CHECK(events[1].id == "7");  // the last event id carries over
    CHECK(events[2].data.empty());
    CHECK(events[3].event == "custom");
    CHECK(events[3].data == "two words ");
  }
}

TEST_CASE("an event that never ends is too_large as soon as it passes the bound") {
  sse_reader reader(1024);
  int events = 0;
  egress_result<void> fed = reader.feed("data: ", [&](sse_event&&) { ++events; });
  std::size_t given = 6;
  while (fed && given < 1 << 20) {
    fed = reader.feed(std::string(100, 'x'), [&](sse_event&&) { ++events; });
    given += 100;
  }
  REQUIRE_FALSE(fed);
  CHECK(fed.error().kind == egress_error_kind::too_large);
  CHECK(given <= 1024 + 100);
  CHECK(events == 0);

  sse_reader many_lines(1024);
  fed = boost::outcome_v2::success();
  for (int i = 0; fed && i < 100; ++i) fed = many_lines.feed("data: 0123456789\n", [&](sse_event&&) { ++events; });
  CHECK_FALSE(fed);
  CHECK(events == 0);
}

TEST_CASE("a NUL byte is malformed") {
  sse_reader reader(1024);
  auto fed = reader.feed(std::string_view("data: a\0b\n\n", 11), [](sse_event&&) {});
  REQUIRE_FALSE(fed);
  CHECK(fed.error().kind == egress_error_kind::malformed);
}
