#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "rss.hpp"
#include "temp_dir.hpp"
#include "psych/host/blob_store.hpp"
#include "psych/host/output_reader.hpp"
#include "psych/host/read_tool_output.hpp"

#include <fmt/format.h>

using namespace psych;

namespace {

output_window read_ok(std::string_view bytes, const output_request& request, const output_bounds& bounds = {}) {
  auto window = read_output(bytes, request, bounds);
  REQUIRE_MESSAGE(window.has_value(), window.error().message());
  return std::move(window).value();
}

error read_error(std::string_view bytes, const output_request& request, const output_bounds& bounds = {}) {
  auto window = read_output(bytes, request, bounds);
  REQUIRE(window.has_error());
  return window.error();
}

std::vector<std::uint64_t> numbers(const output_window& window) {
  std::vector<std::uint64_t> out;
  for (const auto& line : window.lines) out.push_back(line.number);
  return out;
}

std::vector<std::string> texts(const output_window& window) {
  std::vector<std::string> out;
  for (const auto& line : window.lines) out.push_back(line.text);
  return out;
}

/// "0\n1\n...\n(n-1)\n"
std::string numbered_lines(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += std::to_string(i) + "\n";
  return out;
}

bool starts_with(const std::string& text, std::string_view prefix) { return text.starts_with(prefix); }

}  // namespace

TEST_CASE("output reader: lines are split on newlines, a last unterminated line counts") {
  struct example {
    std::string_view bytes;
    std::uint64_t lines;
    std::vector<std::string> texts;
  };
  const std::vector<example> examples = {
      {"", 0, {}},
      {"\n", 1, {""}},
      {"a", 1, {"a"}},
      {"a\n", 1, {"a"}},
      {"a\nb", 2, {"a", "b"}},
      {"a\nb\n", 2, {"a", "b"}},
      {"\n\n\n", 3, {"", "", ""}},
      {"a\r\nb", 2, {"a\r", "b"}},
  };
  for (const auto& e : examples) {
    CAPTURE(e.bytes);
    const auto window = read_ok(e.bytes, {});
    CHECK(window.total_lines == e.lines);
    CHECK(window.total_bytes == e.bytes.size());
    CHECK(texts(window) == e.texts);
    CHECK_FALSE(window.next_offset);
    CHECK_FALSE(window.line_truncated);
  }
}

TEST_CASE("output reader: a window is offset and limit, capped by max_lines") {
  const std::string bytes = numbered_lines(10);
  SUBCASE("a middle window says where the next starts") {
    const auto window = read_ok(bytes, {.offset = 2, .limit = 3});
    CHECK(numbers(window) == std::vector<std::uint64_t>{2, 3, 4});
    CHECK(texts(window) == std::vector<std::string>{"2", "3", "4"});
    CHECK(window.next_offset == 5);
    CHECK(window.total_lines == 10);
  }
  SUBCASE("a window reaching the end has no next offset") {
    const auto window = read_ok(bytes, {.offset = 7, .limit = 3});
    CHECK(numbers(window) == std::vector<std::uint64_t>{7, 8, 9});
    CHECK_FALSE(window.next_offset);
  }
  SUBCASE("a window past the end is empty") {
    const auto window = read_ok(bytes, {.offset = 50, .limit = 3});
    CHECK(window.lines.empty());
    CHECK(window.total_lines == 10);
    CHECK_FALSE(window.next_offset);
  }
  SUBCASE("max_lines caps the limit") {
    const auto window = read_ok(bytes, {.offset = 0, .limit = 100}, {.max_lines = 4});
    CHECK(numbers(window) == std::vector<std::uint64_t>{0, 1, 2, 3});
    CHECK(window.next_offset == 4);
  }
  SUBCASE("an offset far into the output, past many blocks, lands on its line") {
    const std::string many = numbered_lines(5000);
    for (const std::uint64_t offset : {0, 1, 818, 819, 820, 1000, 4321, 4999}) {
      CAPTURE(offset);
      const auto window = read_ok(many, {.offset = offset, .limit = 2});
      REQUIRE_FALSE(window.lines.empty());
      CHECK(window.lines[0].number == offset);
      CHECK(window.lines[0].text == std::to_string(offset));
    }
    const auto unterminated = read_ok(std::string(4096, 'x'), {.offset = 1});
    CHECK(unterminated.lines.empty());
    CHECK(unterminated.total_lines == 1);
  }
  SUBCASE("a zero limit returns nothing and points at the offset") {
    const auto window = read_ok(bytes, {.offset = 3, .limit = 0});
    CHECK(window.lines.empty());
    CHECK(window.next_offset == 3);
  }
}

TEST_CASE("output reader: the byte ceiling cuts the window or refuses it") {
  const std::string bytes = "aaaa\nbbbb\ncccc\ndddd\n";
  SUBCASE("cut_to_fit ends early at the first line not returned") {
    const auto window = read_ok(bytes, {.limit = 10}, {.max_bytes = 10, .cut_to_fit = true});
    CHECK(texts(window) == std::vector<std::string>{"aaaa", "bbbb"});
    CHECK(window.next_offset == 2);
    CHECK(window.total_lines == 4);
  }
  SUBCASE("a window that fits exactly is whole") {
    const auto window = read_ok(bytes, {.limit = 10}, {.max_bytes = 16, .cut_to_fit = false});
    CHECK(window.lines.size() == 4);
    CHECK_FALSE(window.next_offset);
  }
  SUBCASE("without cut_to_fit the window is refused, naming what was asked and the ceiling") {
    const auto failed = read_error(bytes, {.limit = 10}, {.max_bytes = 10, .cut_to_fit = false});
    CHECK(failed.kind == error_kind::output_window_too_large);
    CHECK(failed.detail.find("16 bytes") != std::string::npos);
    CHECK(failed.detail.find("ceiling is 10") != std::string::npos);
  }
  SUBCASE("a first line wider than the ceiling is cut to it, so the reader moves on") {
    const auto window = read_ok(bytes, {.limit = 10}, {.max_bytes = 3, .cut_to_fit = true});
    CHECK(texts(window) == std::vector<std::string>{"aaa"});
    CHECK(window.line_truncated);
    CHECK(window.next_offset == 1);
  }
}

TEST_CASE("output reader: a long line is cut on a character boundary, invalid bytes are replaced") {
  SUBCASE("a multi-byte character straddling the cap is left out whole") {
    const std::string bytes = "ab\xE2\x82\xAC" "cd\nok\n";  // "ab€cd": € is 3 bytes at 2..4
    const auto window = read_ok(bytes, {}, {.max_line_bytes = 4});
    CHECK(texts(window) == std::vector<std::string>{"ab", "ok"});
    CHECK(window.line_truncated);
  }
  SUBCASE("a line exactly at the cap is not cut") {
    const auto window = read_ok("ab\xE2\x82\xAC\n", {}, {.max_line_bytes = 5});
    CHECK(texts(window) == std::vector<std::string>{"ab\xE2\x82\xAC"});
    CHECK_FALSE(window.line_truncated);
  }
  SUBCASE("invalid UTF-8 becomes U+FFFD") {
    const auto window = read_ok("a\xFF" "b\n\xC3\n\xED\xA0\x80\n", {});
    CHECK(texts(window) == std::vector<std::string>{"a\xEF\xBF\xBD" "b", "\xEF\xBF\xBD",
                                                    "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"});
    CHECK_FALSE(window.line_truncated);
  }
  SUBCASE("the cap counts the replaced text") {
    const auto window = read_ok("\xFF\xFF\xFF\n", {}, {.max_line_bytes = 7});
    CHECK(texts(window) == std::vector<std::string>{"\xEF\xBF\xBD\xEF\xBF\xBD"});
    CHECK(window.line_truncated);
  }
}

TEST_CASE("output reader: a pattern returns the matching lines with their numbers") {
  const std::string bytes = "ok 1\nerror: disk\nok 2\nerror: net\nok 3\nfatal error\n";
  SUBCASE("every match") {
    const auto window = read_ok(bytes, {.pattern = "error"});
    CHECK(numbers(window) == std::vector<std::uint64_t>{1, 3, 5});
    CHECK(texts(window) == std::vector<std::string>{"error: disk", "error: net", "fatal error"});
    CHECK(window.total_lines == 6);
    CHECK_FALSE(window.next_offset);
  }
  SUBCASE("the limit stops the scan after the last match examined") {
    const auto window = read_ok(bytes, {.limit = 1, .pattern = "^error"});
    CHECK(numbers(window) == std::vector<std::uint64_t>{1});
    CHECK(window.next_offset == 2);
    const auto next = read_ok(bytes, {.offset = 2, .limit = 1, .pattern = "^error"});
    CHECK(numbers(next) == std::vector<std::uint64_t>{3});
    CHECK(next.next_offset == 4);
  }
  SUBCASE("a limit reached on the last line leaves nothing to continue") {
    const auto window = read_ok(bytes, {.offset = 4, .limit = 1, .pattern = "error"});
    CHECK(numbers(window) == std::vector<std::uint64_t>{5});
    CHECK_FALSE(window.next_offset);
  }
  SUBCASE("the byte ceiling applies to matches too") {
    const auto window = read_ok(bytes, {.pattern = "error"}, {.max_bytes = 22, .cut_to_fit = true});
    CHECK(numbers(window) == std::vector<std::uint64_t>{1, 3});
    CHECK(window.next_offset == 5);
    const auto failed = read_error(bytes, {.pattern = "error"}, {.max_bytes = 22, .cut_to_fit = false});
    CHECK(failed.kind == error_kind::output_window_too_large);
    CHECK(failed.detail.find("32 bytes") != std::string::npos);
  }
  SUBCASE("empty lines match a pattern that matches the empty string") {
    const auto window = read_ok("a\n\nb\n\n", {.pattern = "^$"});
    CHECK(numbers(window) == std::vector<std::uint64_t>{1, 3});
    CHECK(read_ok("\n\n", {.pattern = "x"}).lines.empty());
  }
  SUBCASE("no match") {
    const auto window = read_ok(bytes, {.pattern = "panic"});
    CHECK(window.lines.empty());
    CHECK_FALSE(window.next_offset);
  }
  SUBCASE("a match on invalid UTF-8 returns the sanitized line") {
    const auto window = read_ok("x\xFFy\n", {.pattern = "x"});
    CHECK(texts(window) == std::vector<std::string>{"x\xEF\xBF\xBDy"});
  }
}

TEST_CASE("output reader: a pattern is refused before any search") {
  SUBCASE("invalid syntax") {
    const auto failed = read_error("a\n", {.pattern = "("});
    CHECK(failed.kind == error_kind::output_pattern_rejected);
    CHECK(starts_with(failed.detail, "invalid: "));
  }
  SUBCASE("a backreference, which RE2 does not do") {
    const auto failed = read_error("aa\n", {.pattern = "(a)\\1"});
    CHECK(failed.kind == error_kind::output_pattern_rejected);
    CHECK(starts_with(failed.detail, "invalid: "));
  }
  SUBCASE("lookaround, which RE2 does not do") {
    const auto failed = read_error("aa\n", {.pattern = "a(?=a)"});
    CHECK(failed.kind == error_kind::output_pattern_rejected);
    CHECK(starts_with(failed.detail, "invalid: "));
  }
  SUBCASE("too long") {
    const auto failed = read_error("a\n", {.pattern = std::string(1025, 'a')});
    CHECK(failed.kind == error_kind::output_pattern_rejected);
    CHECK(starts_with(failed.detail, "too long: "));
  }
  SUBCASE("too complex for the memory budget") {
    const auto failed = read_error("a\n", {.pattern = "\\pL{1000}"}, {.max_pattern_memory = std::int64_t{1} << 20});
    CHECK(failed.kind == error_kind::output_pattern_rejected);
    CHECK(starts_with(failed.detail, "too complex: "));
  }
  SUBCASE("nested counted repetitions past RE2's limit are too complex") {
    const auto failed = read_error("a\n", {.pattern = "((((((a{1000}){1000}){1000})))"});
    CHECK(failed.kind == error_kind::output_pattern_rejected);
    CHECK(starts_with(failed.detail, "too complex: "));
  }
}

TEST_CASE("output reader: a catastrophic-backtracking pattern is linear and returns") {
  const std::string bytes = std::string(100'000, 'a') + "b\n";
  const auto window = read_ok(bytes, {.pattern = "(a+)+$"});
  CHECK(window.lines.empty());
  CHECK(window.total_lines == 1);
}

TEST_CASE("output reader: ten million empty lines are counted") {
  const std::string bytes(10'000'000, '\n');
  const auto window = read_ok(bytes, {.offset = 9'999'998, .limit = 5});
  CHECK(window.total_lines == 10'000'000);
  CHECK(numbers(window) == std::vector<std::uint64_t>{9'999'998, 9'999'999});
  CHECK_FALSE(window.next_offset);
  const auto first = read_ok(bytes, {.limit = 2});
  CHECK(first.next_offset == 2);
}

TEST_CASE("output reader: a 64 MiB single line comes back as one cut line") {
  const std::string bytes(std::size_t{64} << 20, 'x');
  const auto window = read_ok(bytes, {});
  REQUIRE(window.lines.size() == 1);
  CHECK(window.lines[0].text.size() == 4096);
  CHECK(window.line_truncated);
  CHECK(window.total_lines == 1);
  CHECK(window.total_bytes == std::uint64_t{64} << 20);
  CHECK_FALSE(window.next_offset);
}

namespace {

/// An output handed over in pieces of a fixed size, as a store hands a blob over.
class pieces_source final : public output_source {
 public:
  pieces_source(std::string_view bytes, std::size_t piece) : bytes_(bytes), piece_(piece) {}
  result<std::string_view> next() override {
    const auto piece = bytes_.substr(0, piece_);
    bytes_.remove_prefix(piece.size());
    return piece;
  }

 private:
  std::string_view bytes_;
  std::size_t piece_;
};

void check_same(const result<output_window>& got, const result<output_window>& whole) {
  REQUIRE(got.has_value() == whole.has_value());
  if (!whole) {
    CHECK(got.error().kind == whole.error().kind);
    CHECK(got.error().detail == whole.error().detail);
    return;
  }
  CHECK(numbers(got.value()) == numbers(whole.value()));
  CHECK(texts(got.value()) == texts(whole.value()));
  CHECK(got.value().total_lines == whole.value().total_lines);
  CHECK(got.value().total_bytes == whole.value().total_bytes);
  CHECK(got.value().next_offset == whole.value().next_offset);
  CHECK(got.value().line_truncated == whole.value().line_truncated);
  CHECK(got.value().search_cut == whole.value().search_cut);
}

}  // namespace

TEST_CASE("output reader: the window is the same whatever pieces the output arrives in") {
  const std::vector<std::string> outputs = {
      "",
      "\n\n\n",
      "no newline at all",
      numbered_lines(300),
      "ok 1\nerror: disk\nok 2\nerror: net\nok 3\nfatal error\n",
      "ab\xE2\x82\xAC" "cd\n\xFF\xFE\nx\xE2\x82\xACy\n" + std::string(50, 'l') + "\nlast",
  };
  const std::vector<output_request> requests = {
      {}, {.offset = 2, .limit = 3}, {.offset = 299, .limit = 5}, {.limit = 0}, {.offset = 400},
      {.pattern = "error"}, {.offset = 2, .limit = 1, .pattern = "^error"}, {.pattern = "^$"}, {.pattern = "7"},
  };
  const std::vector<output_bounds> bounds = {
      {}, {.max_bytes = 10}, {.max_bytes = 10, .cut_to_fit = false}, {.max_line_bytes = 4}, {.max_lines = 2},
      {.max_search_line_bytes = 3},
  };
  for (const auto& bytes : outputs)
    for (const auto& request : requests)
      for (const auto& bound : bounds) {
        const auto whole = read_output(bytes, request, bound);
        for (const std::size_t piece : {1, 2, 3, 7, 64}) {
          CAPTURE(bytes);
          CAPTURE(piece);
          pieces_source source(bytes, piece);
          check_same(read_output(source, request, bound), whole);
        }
      }
}

TEST_CASE("output reader: a pattern sees the head of a very long line, and says so") {
  const std::string bytes = std::string(100, 'a') + "needle\nshort needle\n";
  const auto window = read_ok(bytes, {.pattern = "needle"}, {.max_search_line_bytes = 64});
  CHECK(numbers(window) == std::vector<std::uint64_t>{1});
  CHECK(window.search_cut);
  const auto head = read_ok(bytes, {.pattern = "^a+$"}, {.max_search_line_bytes = 64});
  CHECK(numbers(head) == std::vector<std::uint64_t>{0});  // what it searched was all a's
  const auto whole = read_ok(bytes, {.pattern = "needle"});  // the default holds a line of a megabyte
  CHECK(numbers(whole) == std::vector<std::uint64_t>{0, 1});
  CHECK_FALSE(whole.search_cut);
  CHECK_FALSE(read_ok(bytes, {}, {.max_search_line_bytes = 64}).search_cut);  // only a search is cut
}

TEST_CASE("output reader: a source's failure is the read's") {
  struct failing final : output_source {
    int calls = 0;
    result<std::string_view> next() override {
      if (calls++ == 0) return std::string_view{"first\n"};
      return fail_with(error_kind::blob_store_failed, "gone");
    }
  } source;
  const auto got = read_output(source, {});
  REQUIRE_FALSE(got);
  CHECK(got.error().kind == error_kind::blob_store_failed);
}

namespace {

/// A field of /proc/self/status in bytes (the kernel reports kB); 0 when absent.
std::uint64_t status_bytes(std::string_view field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.starts_with(field)) return std::strtoull(line.c_str() + field.size(), nullptr, 10) * 1024;
  return 0;
}

/// Sets the peak RSS (VmHWM) to the current RSS, so the next peak is that of what follows alone.
void reset_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  REQUIRE_MESSAGE(clear.good(), "writing 5 to /proc/self/clear_refs (Linux 4.0+) resets VmHWM; it failed here");
}

}  // namespace

TEST_CASE("read_tool_output: a window of a 64 MiB blob costs memory bounded by the window, not the blob") {
  constexpr std::uint64_t mib = std::uint64_t{1} << 20;
  const psych::testing::temp_dir dir("psych-output-reader-test");
  auto opened = open_directory_blob_store(dir.file("blobs"));
  REQUIRE(opened);
  auto& store = *opened.value();
  std::string handle;
  std::uint64_t lines = 0;
  {
    // 64-byte lines, one "needle" in every 100000, and a last line of 4 MiB without a newline.
    std::string bytes;
    bytes.reserve(64 * mib + 8 * mib);
    while (bytes.size() < 64 * mib) {
      bytes += fmt::format("line {:>12} {:.>45}\n", lines, lines % 100000 == 99999 ? "needle" : "hay");
      ++lines;
    }
    bytes += std::string(4 * mib, 'z');
    ++lines;
    auto stored = store.put("tenant", "text/plain", bytes);
    REQUIRE(stored);
    handle = stored.value().handle;
  }  // the blob's bytes are freed: what follows holds at most a window of them

  const auto peak_of = [&](const output_request& request) {
    const std::uint64_t before = status_bytes("VmRSS:");
    reset_peak_rss();
    auto window = read_tool_output(store, "tenant", handle, request);
    const std::uint64_t peak = status_bytes("VmHWM:");
    REQUIRE_MESSAGE(window, (window ? "" : window.error().message()));
    CHECK(window.value().total_lines == lines);
    CHECK(window.value().total_bytes == lines * 64 - 64 + 4 * mib);
    MESSAGE("peak RSS growth " << (peak > before ? peak - before : 0) / 1024 << " KiB");
    // The whole blob would be 68 MiB. Under AddressSanitizer the quarantine keeps every freed
    // window resident, so the figure is printed there and not judged (rss.hpp).
    if (psych::testing::rss_is_meaningful) CHECK(peak < before + 16 * mib);
    return std::move(window).value();
  };
  SUBCASE("a line window far into the blob") {
    const auto window = peak_of({.offset = lines - 3, .limit = 10});
    REQUIRE(window.lines.size() == 3);
    CHECK(window.lines[0].text.starts_with(fmt::format("line {:>12} ", lines - 3)));
    CHECK(window.lines[2].text.size() == 4096);  // the long last line, cut
    CHECK(window.line_truncated);
  }
  SUBCASE("a pattern search through the whole blob") {
    const auto window = peak_of({.limit = 1000, .pattern = std::string("needle$")});
    CHECK(window.lines.size() == (lines - 1) / 100000);
    REQUIRE_FALSE(window.lines.empty());
    CHECK(window.lines[0].number == 99999);
  }
}
