#include "psych/host/output_reader.hpp"

#include <re2/re2.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "psych/utf8.hpp"

namespace psych {
namespace {

/// Lines split on '\n', served one at a time as views into the output: nothing is copied. A last
/// line without its newline counts; an empty output has no lines.
class line_cursor {
 public:
  explicit line_cursor(std::string_view bytes) : bytes_(bytes) {}

  [[nodiscard]] bool done() const { return pos_ >= bytes_.size(); }

  /// Passes over `count` lines (or to the end). Counts newlines a block at a time, so many short
  /// lines cost no more than one long one.
  void skip(std::uint64_t count) {
    static constexpr std::size_t block = 4096;
    std::uint64_t passed = 0;
    while (passed < count && !done()) {
      const std::string_view ahead = bytes_.substr(pos_, block);
      const auto newlines = static_cast<std::uint64_t>(std::count(ahead.begin(), ahead.end(), '\n'));
      if (newlines < count - passed && ahead.size() == block) {
        pos_ += block;
        passed += newlines;
      } else {
        next();
        ++passed;
      }
    }
  }

  /// The next line, without its newline. Only when !done().
  std::string_view next() {
    const char* start = bytes_.data() + pos_;
    const std::size_t left = bytes_.size() - pos_;
    const auto* newline = static_cast<const char*>(std::memchr(start, '\n', left));
    const std::size_t length = newline != nullptr ? static_cast<std::size_t>(newline - start) : left;
    pos_ += length + (newline != nullptr ? 1 : 0);
    return {start, length};
  }

 private:
  std::string_view bytes_;
  std::size_t pos_ = 0;
};

std::uint64_t count_lines(std::string_view bytes) {
  if (bytes.empty()) return 0;
  const auto newlines = static_cast<std::uint64_t>(std::count(bytes.begin(), bytes.end(), '\n'));
  return newlines + (bytes.back() != '\n' ? 1 : 0);
}

struct cut_text {
  std::uint64_t bytes = 0;  ///< of the valid UTF-8 text
  bool truncated = false;   ///< the line did not fit whole
};

/// The line as valid UTF-8 of at most `cap` bytes: each invalid byte becomes U+FFFD and the cut
/// falls between characters. Appends to `out` when given, otherwise only measures. Reads at most
/// about `cap` bytes of the line, however long it is.
cut_text bounded_text(std::string_view line, std::uint64_t cap, std::string* out) {
  static constexpr std::string_view replacement = "\xEF\xBF\xBD";
  cut_text cut;
  if (out != nullptr) out->reserve(static_cast<std::size_t>(std::min<std::uint64_t>(line.size(), cap)));
  std::size_t i = 0;
  while (i < line.size()) {
    const std::size_t valid = utf8::sequence_length(line, i);
    const std::string_view piece = valid != 0 ? line.substr(i, valid) : replacement;
    if (cut.bytes + piece.size() > cap) {
      cut.truncated = true;
      break;
    }
    if (out != nullptr) out->append(piece);
    cut.bytes += piece.size();
    i += valid != 0 ? valid : 1;
  }
  return cut;
}

/// The lines of one answer under the byte ceiling. Past the ceiling it either cuts the window
/// (cut_to_fit) or goes on measuring, without keeping text, so the refusal can say how much
/// was asked for.
class window_builder {
 public:
  explicit window_builder(const output_bounds& bounds) : bounds_(bounds) {}

  /// Adds line `number`. False when the window is cut before it: it is the first line not returned.
  bool add(std::uint64_t number, std::string_view line) {
    if (over_) {
      asked_ += bounded_text(line, bounds_.max_line_bytes, nullptr).bytes;
      return true;
    }
    std::string text;
    cut_text cut = bounded_text(line, bounds_.max_line_bytes, &text);
    if (used_ + cut.bytes > bounds_.max_bytes) {
      if (!bounds_.cut_to_fit) {
        over_ = true;
        asked_ = used_ + cut.bytes;
        return true;
      }
      if (!window_.lines.empty()) return false;
      // A first line wider than the whole ceiling is cut to it, so a reader always moves on.
      text.clear();
      cut = bounded_text(line, bounds_.max_bytes, &text);
    }
    used_ += cut.bytes;
    window_.line_truncated = window_.line_truncated || cut.truncated;
    window_.lines.push_back(output_line{number, std::move(text)});
    return true;
  }

  result<output_window> finish(std::uint64_t total_lines, std::uint64_t total_bytes,
                               std::optional<std::uint64_t> next_offset) && {
    if (over_)
      return failure(error_kind::output_window_too_large,
                     fmt::format("the window asks for {} bytes of text, the ceiling is {}; ask for fewer lines",
                                 asked_, bounds_.max_bytes));
    window_.total_lines = total_lines;
    window_.total_bytes = total_bytes;
    window_.next_offset = next_offset;
    return std::move(window_);
  }

 private:
  const output_bounds& bounds_;
  output_window window_;
  std::uint64_t used_ = 0;   ///< bytes of text kept
  std::uint64_t asked_ = 0;  ///< bytes the request needs, counted once past the ceiling
  bool over_ = false;
};

/// Compiles the pattern under the bounds, or says why not. RE2 runs in UTF-8 mode; invalid bytes
/// of the output match no character (not even '.'), and lines are searched as they are, unsanitized.
result<std::unique_ptr<RE2>> compile(const std::string& pattern, const output_bounds& bounds) {
  if (pattern.size() > bounds.max_pattern_bytes)
    return failure(error_kind::output_pattern_rejected,
                   fmt::format("too long: {} bytes, the ceiling is {}", pattern.size(), bounds.max_pattern_bytes));
  RE2::Options options;
  options.set_encoding(RE2::Options::EncodingUTF8);
  options.set_max_mem(bounds.max_pattern_memory);
  options.set_log_errors(false);
  auto compiled = std::make_unique<RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
  if (compiled->ok()) return compiled;
  switch (compiled->error_code()) {
    case RE2::ErrorPatternTooLarge:
    case RE2::ErrorRepeatSize:  // a counted repetition past RE2's limits: size, not syntax
      return failure(error_kind::output_pattern_rejected,
                     fmt::format("too complex: {} (memory budget {} bytes)", compiled->error(),
                                 bounds.max_pattern_memory));
    default:
      return failure(error_kind::output_pattern_rejected, fmt::format("invalid: {}", compiled->error()));
  }
}

}  // namespace

result<output_window> read_output(std::string_view bytes, const output_request& request,
                                  const output_bounds& bounds) {
  std::unique_ptr<RE2> pattern;
  if (request.pattern) {
    PSYCH_TRY(auto compiled, compile(*request.pattern, bounds));
    pattern = std::move(compiled);
  }
  const std::uint64_t total_lines = count_lines(bytes);
  const std::uint64_t wanted = std::min(request.limit, bounds.max_lines);
  line_cursor cursor(bytes);
  cursor.skip(request.offset);
  // Empty lines are common and all alike: ask the engine about them once.
  const bool empty_matches = pattern && pattern->Match(re2::StringPiece(), 0, 0, RE2::UNANCHORED, nullptr, 0);
  const auto matches = [&](std::string_view line) {
    if (!pattern) return true;
    if (line.empty()) return empty_matches;
    return pattern->Match(re2::StringPiece(line.data(), line.size()), 0, line.size(), RE2::UNANCHORED, nullptr, 0);
  };

  window_builder window(bounds);
  std::optional<std::uint64_t> next_offset;
  std::uint64_t number = request.offset;
  std::uint64_t taken = 0;
  while (!cursor.done()) {
    if (taken == wanted) {
      next_offset = number;
      break;
    }
    const std::string_view line = cursor.next();
    if (matches(line)) {
      if (!window.add(number, line)) {
        next_offset = number;
        break;
      }
      ++taken;
    }
    ++number;
  }
  return std::move(window).finish(total_lines, bytes.size(), next_offset);
}

}  // namespace psych
