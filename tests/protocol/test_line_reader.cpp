// The bounded NDJSON splitter: one TEST_CASE per rule, SUBCASEs per dimension.
#include <string>
#include <string_view>
#include <vector>

#include "helpers.hpp"

using namespace psych;
using namespace psych::protocol;
using psych::protocol::testing::expect_error;

namespace {

/// Feeds `chunks` and collects the lines; returns the first failure, if any.
struct collector {
  std::vector<std::string> lines;
  result<void> feed(line_reader& reader, std::string_view chunk) {
    return reader.feed(chunk, [&](std::string_view line) { lines.emplace_back(line); });
  }
};

constexpr std::size_t chunk_size = 64 * 1024;

}  // namespace

TEST_CASE("line_reader: a line inside one chunk is handed out as a view into it") {
  line_reader reader;
  const std::string chunk = "{\"a\":1}\n{\"b\":2}\n";
  std::vector<std::string_view> views;
  REQUIRE(reader.feed(chunk, [&](std::string_view line) { views.push_back(line); }));
  REQUIRE(views.size() == 2);
  CHECK(views[0] == "{\"a\":1}");
  CHECK(views[0].data() == chunk.data());
  CHECK(views[1].data() == chunk.data() + 8);
  CHECK(reader.buffered_bytes() == 0);
  CHECK(reader.frames() == 2);
  CHECK(reader.finish());
}

TEST_CASE("line_reader: a line split across feeds is reassembled") {
  const std::string stream = "{\"type\":\"run\"}\nsecond line\n\nthird\n";
  const std::vector<std::string> expected{"{\"type\":\"run\"}", "second line", "third"};

  SUBCASE("split at every position") {
    for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
      line_reader reader;
      collector c;
      REQUIRE(c.feed(reader, std::string_view{stream}.substr(0, cut)));
      REQUIRE(c.feed(reader, std::string_view{stream}.substr(cut)));
      CHECK(c.lines == expected);
      CHECK(reader.finish());
    }
  }
  SUBCASE("one byte at a time") {
    line_reader reader;
    collector c;
    for (char byte : stream) REQUIRE(c.feed(reader, std::string_view{&byte, 1}));
    CHECK(c.lines == expected);
    CHECK(reader.finish());
  }
  SUBCASE("an empty feed changes nothing") {
    line_reader reader;
    collector c;
    REQUIRE(c.feed(reader, "par"));
    REQUIRE(c.feed(reader, ""));
    CHECK(reader.buffered_bytes() == 3);
    REQUIRE(c.feed(reader, "tial\n"));
    CHECK(c.lines == std::vector<std::string>{"partial"});
    CHECK(reader.buffered_bytes() == 0);
  }
}

TEST_CASE("line_reader: a trailing carriage return is kept") {
  line_reader reader;
  collector c;
  REQUIRE(c.feed(reader, "{}\r\n\r\n"));
  CHECK(c.lines == std::vector<std::string>{"{}\r", "\r"});
  CHECK(reader.empty_lines() == 0);
}

TEST_CASE("line_reader: empty lines are skipped, counted and bounded") {
  SUBCASE("skipped and counted") {
    line_reader reader;
    collector c;
    REQUIRE(c.feed(reader, "\n\na\n\n"));
    CHECK(c.lines == std::vector<std::string>{"a"});
    CHECK(reader.empty_lines() == 3);
    CHECK(reader.frames() == 1);
  }
  SUBCASE("exactly the bound is fine") {
    line_reader reader{stream_bounds{.max_empty_lines = 5}};
    collector c;
    CHECK(c.feed(reader, std::string(5, '\n')));
    expect_error(c.feed(reader, "\n"), error_kind::too_many_empty_lines);
  }
  SUBCASE("10^7 empty lines stop at the bound, inside the first chunk") {
    line_reader reader;  // default: 1,000
    const std::string newlines(chunk_size, '\n');
    std::size_t fed = 0;
    std::size_t feeds = 0;
    result<void> outcome = success();
    while (fed < 10'000'000 && outcome) {
      outcome = reader.feed(newlines, [](std::string_view) { FAIL("no line expected"); });
      fed += newlines.size();
      ++feeds;
    }
    expect_error(outcome, error_kind::too_many_empty_lines);
    CHECK(feeds == 1);
    CHECK(reader.empty_lines() == 1'001);
  }
}

TEST_CASE("line_reader: frame_too_large is detected as the bytes arrive") {
  constexpr std::size_t bound = 1000;
  const stream_bounds bounds{.max_frame_bytes = bound};

  SUBCASE("a line of exactly the bound passes, in one chunk or split") {
    const std::string line = std::string(bound, 'x') + "\n";
    for (std::size_t cut : {std::size_t{0}, std::size_t{1}, bound / 2, bound, bound + 1}) {
      line_reader reader{bounds};
      collector c;
      REQUIRE(c.feed(reader, std::string_view{line}.substr(0, cut)));
      REQUIRE(c.feed(reader, std::string_view{line}.substr(cut)));
      REQUIRE(c.lines.size() == 1);
      CHECK(c.lines[0].size() == bound);
    }
  }
  SUBCASE("one byte more fails, in one chunk or split") {
    const std::string line = std::string(bound + 1, 'x') + "\n";
    for (std::size_t cut : {std::size_t{0}, std::size_t{1}, bound / 2, bound, bound + 1}) {
      line_reader reader{bounds};
      collector c;
      result<void> first = c.feed(reader, std::string_view{line}.substr(0, cut));
      result<void> outcome = first ? c.feed(reader, std::string_view{line}.substr(cut)) : first;
      expect_error(outcome, error_kind::frame_too_large);
      CHECK(c.lines.empty());
      CHECK(reader.buffered_bytes() == 0);
    }
  }
  SUBCASE("the lines before an oversized one are delivered") {
    line_reader reader{bounds};
    collector c;
    expect_error(c.feed(reader, "a\nb\n" + std::string(bound + 1, 'x')), error_kind::frame_too_large);
    CHECK(c.lines == std::vector<std::string>{"a", "b"});
  }
  SUBCASE("a huge line in 64 KiB chunks fails at the first chunk past the bound") {
    const stream_bounds big{.max_frame_bytes = std::size_t{1} << 20};  // 16 chunks
    line_reader reader{big};
    const std::string chunk(chunk_size, 'y');
    std::size_t feeds = 0;
    result<void> outcome = success();
    while (outcome && feeds < 1000) {
      outcome = reader.feed(chunk, [](std::string_view) { FAIL("no line expected"); });
      ++feeds;
      CHECK(reader.buffered_bytes() <= big.max_frame_bytes);
    }
    expect_error(outcome, error_kind::frame_too_large);
    CHECK(feeds == big.max_frame_bytes / chunk_size + 1);
    CHECK(reader.buffered_bytes() == 0);  // released once poisoned
  }
  SUBCASE("a huge line in one chunk fails without buffering it") {
    line_reader reader{bounds};
    const std::string chunk(100 * bound, 'z');
    expect_error(reader.feed(chunk, [](std::string_view) {}), error_kind::frame_too_large);
    CHECK(reader.buffered_bytes() == 0);
  }
}

TEST_CASE("line_reader: stream_too_large") {
  SUBCASE("a 1 GiB stream fed in 64 KiB chunks stops right after 1 GiB") {
    // Lines of 4 KiB, so the default frame count is not what stops it; one
    // chunk buffer reused throughout, and the reader never buffers more than
    // the tail of one line.
    line_reader reader;
    std::string chunk;
    while (chunk.size() < chunk_size) chunk += std::string(4095, 'a') + "\n";
    REQUIRE(chunk.size() == chunk_size);
    std::uint64_t fed = 0;
    std::uint64_t lines = 0;
    std::size_t max_buffered = 0;
    result<void> outcome = success();
    while (outcome) {
      outcome = reader.feed(chunk, [&](std::string_view) { ++lines; });
      fed += chunk.size();
      max_buffered = std::max(max_buffered, reader.buffered_bytes());
    }
    expect_error(outcome, error_kind::stream_too_large);
    CHECK(fed == (1ull << 30) + chunk_size);
    CHECK(reader.stream_bytes() == 1ull << 30);
    CHECK(lines == (1ull << 30) / 4096);
    CHECK(max_buffered == 0);
  }
  SUBCASE("the lines inside the bound are delivered, the excess is refused") {
    line_reader reader{stream_bounds{.max_stream_bytes = 10}};
    collector c;
    expect_error(c.feed(reader, "abc\ndef\nghi\n"), error_kind::stream_too_large);
    CHECK(c.lines == std::vector<std::string>{"abc", "def"});
    CHECK(reader.stream_bytes() == 10);
  }
  SUBCASE("exactly the bound is fine") {
    line_reader reader{stream_bounds{.max_stream_bytes = 8}};
    collector c;
    CHECK(c.feed(reader, "abc\ndef\n"));
    expect_error(c.feed(reader, "x"), error_kind::stream_too_large);
  }
}

TEST_CASE("line_reader: too_many_frames") {
  line_reader reader{stream_bounds{.max_frames = 3}};
  collector c;
  CHECK(c.feed(reader, "1\n2\n"));
  expect_error(c.feed(reader, "3\n\n4\n5\n"), error_kind::too_many_frames);
  CHECK(c.lines == std::vector<std::string>{"1", "2", "3"});
}

TEST_CASE("line_reader: finish() names a truncated frame") {
  SUBCASE("a pending partial line") {
    line_reader reader;
    collector c;
    REQUIRE(c.feed(reader, "{\"type\":\"done\"}\n{\"type\":"));
    expect_error(reader.finish(), error_kind::truncated_frame);
  }
  SUBCASE("nothing pending") {
    line_reader reader;
    collector c;
    REQUIRE(c.feed(reader, "{}\n\n"));
    CHECK(reader.finish());
  }
}

TEST_CASE("line_reader: a violation poisons the reader") {
  struct violation {
    const char* name;
    stream_bounds bounds;
    std::string bytes;
    error_kind kind;
  };
  const std::vector<violation> violations{
      {"frame", {.max_frame_bytes = 4}, "12345", error_kind::frame_too_large},
      {"stream", {.max_stream_bytes = 4}, "12345", error_kind::stream_too_large},
      {"frames", {.max_frames = 1}, "1\n2\n", error_kind::too_many_frames},
      {"empty lines", {.max_empty_lines = 1}, "\n\n", error_kind::too_many_empty_lines},
  };
  for (const violation& v : violations) {
    SUBCASE(v.name) {
      line_reader reader{v.bounds};
      collector c;
      const error first = expect_error(c.feed(reader, v.bytes), v.kind);
      CHECK(reader.poisoned());
      const error again = expect_error(c.feed(reader, "ok\n"), v.kind);
      CHECK(again.detail == first.detail);
      expect_error(reader.finish(), v.kind);
    }
  }
}

TEST_CASE("line_reader: a failed line callback stops the feed") {
  line_reader reader;
  std::vector<std::string> seen;
  auto on_line = [&](std::string_view line) -> result<void> {
    seen.emplace_back(line);
    if (line == "bad") return fail_with(error_kind::json_malformed, "test");
    return success();
  };
  expect_error(reader.feed("good\nbad\nnever\n", on_line), error_kind::json_malformed);
  CHECK(seen == std::vector<std::string>{"good", "bad"});
  expect_error(reader.feed("more\n", on_line), error_kind::json_malformed);
  CHECK(seen.size() == 2);
}
