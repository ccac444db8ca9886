#include "psych/host/output_reader.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "bindings/line_pattern.hpp"
#include "psych/utf8.hpp"

namespace psych {
namespace {

struct cut_text {
  std::uint64_t bytes = 0;  ///< of the valid UTF-8 text
  bool truncated = false;   ///< the line did not fit whole
};

/// The line as valid UTF-8 of at most `cap` bytes: each ill-formed subpart becomes U+FFFD and the cut
/// falls between characters. Appends to `out` when given, otherwise only measures. Reads at most
/// about `cap` bytes of the line, however long it is.
cut_text bounded_text(std::string_view line, std::uint64_t cap, std::string* out) {
  cut_text cut;
  if (out != nullptr) out->reserve(static_cast<std::size_t>(std::min<std::uint64_t>(line.size(), cap)));
  std::size_t i = 0;
  while (i < line.size()) {
    const std::size_t valid = utf8::sequence_length(line, i);
    const std::string_view piece = valid != 0 ? line.substr(i, valid) : utf8::replacement_character;
    if (cut.bytes + piece.size() > cap) {
      cut.truncated = true;
      break;
    }
    if (out != nullptr) out->append(piece);
    cut.bytes += piece.size();
    i += utf8::advance(line, i);
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
      return fail_with(error_kind::output_window_too_large,
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

/// Compiles the pattern under the bounds (line_pattern.hpp), or says why not.
result<std::unique_ptr<line_pattern>> compile(const std::string& pattern, const output_bounds& bounds) {
  if (pattern.size() > bounds.max_pattern_bytes)
    return fail_with(error_kind::output_pattern_rejected,
                   fmt::format("too long: {} bytes, the ceiling is {}", pattern.size(), bounds.max_pattern_bytes));
  return compile_line_pattern(pattern, bounds);
}

/// One pass over a source: lines before the window are only counted, lines in it are kept as far
/// as `keep` bytes (their head) and handed to the window, and once the window is done the rest is
/// only counted. A line never costs more than `keep` bytes, whatever its length.
class line_scan {
 public:
  line_scan(const output_request& request, const output_bounds& bounds, const line_pattern* pattern)
      : request_(request),
        pattern_(pattern),
        wanted_(std::min(request.limit, bounds.max_lines)),
        keep_(kept_bytes(bounds, pattern != nullptr)),
        searched_(static_cast<std::size_t>(std::min<std::uint64_t>(bounds.max_search_line_bytes, SIZE_MAX))),
        window_(bounds),
        phase_(request.offset > 0 ? phase::skipping : phase::collecting),
        number_(0) {
    // Empty lines are common and all alike: ask the engine about them once.
    empty_matches_ = pattern_ && pattern_->found_in({});
  }

  void feed(std::string_view piece) {
    seen_ += piece.size();
    last_ = piece.back();
    while (!piece.empty()) {
      switch (phase_) {
        case phase::counting:
          newlines_ += static_cast<std::uint64_t>(std::count(piece.begin(), piece.end(), '\n'));
          return;
        case phase::skipping: skip(piece); break;
        case phase::collecting: collect(piece); break;
      }
    }
  }

  result<output_window> finish() && {
    if (phase_ == phase::collecting && length_ > 0) end_line();  // a last line without its newline
    const std::uint64_t total_lines = newlines_ + (seen_ > 0 && last_ != '\n' ? 1 : 0);
    auto window = std::move(window_).finish(total_lines, seen_, next_offset_);
    if (window) window.value().search_cut = search_cut_;
    return window;
  }

 private:
  enum class phase { skipping, collecting, counting };

  /// Enough of a line for its cut text (every character within the cap starts before it and is at
  /// most 4 bytes), or for the search, whichever is more; saturating, so "no cap" stays no cap.
  static std::size_t kept_bytes(const output_bounds& bounds, bool searching) {
    std::uint64_t keep = bounds.max_line_bytes > UINT64_MAX - 4 ? UINT64_MAX : bounds.max_line_bytes + 4;
    if (searching) keep = std::max(keep, bounds.max_search_line_bytes);
    return static_cast<std::size_t>(std::min<std::uint64_t>(keep, SIZE_MAX));
  }

  /// Passes newlines until line `offset` starts. Counts a whole piece at once when the offset lies
  /// beyond it, so many short lines cost no more than one long one.
  void skip(std::string_view& piece) {
    const std::uint64_t left = request_.offset - number_;
    const auto newlines = static_cast<std::uint64_t>(std::count(piece.begin(), piece.end(), '\n'));
    if (newlines < left) {
      number_ += newlines;
      newlines_ += newlines;
      piece = {};
      return;
    }
    for (std::uint64_t passed = 0; passed < left; ++passed) {
      const auto at = piece.find('\n');
      piece.remove_prefix(at + 1);
    }
    number_ += left;
    newlines_ += left;
    phase_ = phase::collecting;
  }

  void collect(std::string_view& piece) {
    const auto* newline = static_cast<const char*>(std::memchr(piece.data(), '\n', piece.size()));
    const std::size_t length = newline != nullptr ? static_cast<std::size_t>(newline - piece.data()) : piece.size();
    if (head_.size() < keep_) head_.append(piece.data(), std::min(length, keep_ - head_.size()));
    length_ += length;
    if (newline == nullptr) {
      piece = {};
      return;
    }
    piece.remove_prefix(length + 1);
    ++newlines_;
    end_line();
  }

  bool matches(std::string_view line) const {
    if (!pattern_) return true;
    if (line.empty()) return empty_matches_;
    return pattern_->found_in(line);
  }

  /// Line `number_` is whole (or as much of it as is kept): it is the window's, or the window is done.
  void end_line() {
    if (taken_ == wanted_) return stop_at(number_);
    if (pattern_ && length_ > searched_) search_cut_ = true;
    if (matches(std::string_view(head_).substr(0, searched_))) {
      if (!window_.add(number_, head_)) return stop_at(number_);
      ++taken_;
    }
    ++number_;
    head_.clear();
    length_ = 0;
  }

  void stop_at(std::uint64_t next) {
    next_offset_ = next;
    phase_ = phase::counting;
    head_ = {};  // its memory too: counting needs none
  }

  const output_request& request_;
  const line_pattern* pattern_;
  const std::uint64_t wanted_;
  const std::size_t keep_;
  const std::size_t searched_;  ///< how much of a line's head a pattern sees
  window_builder window_;
  phase phase_;
  std::uint64_t number_;       ///< the line being read
  std::uint64_t newlines_ = 0;  ///< in everything fed so far
  std::uint64_t seen_ = 0;     ///< bytes fed so far
  char last_ = '\n';           ///< the last byte fed
  std::string head_;           ///< the first keep_ bytes of the line being collected
  std::uint64_t length_ = 0;   ///< its bytes so far
  std::uint64_t taken_ = 0;
  std::optional<std::uint64_t> next_offset_;
  bool empty_matches_ = false;
  bool search_cut_ = false;
};

/// The whole output at once, as one piece.
class whole_source final : public output_source {
 public:
  explicit whole_source(std::string_view bytes) : bytes_(bytes) {}
  result<std::string_view> next() override { return std::exchange(bytes_, std::string_view{}); }

 private:
  std::string_view bytes_;
};

}  // namespace

result<output_window> read_output(output_source& source, const output_request& request,
                                  const output_bounds& bounds) {
  std::unique_ptr<line_pattern> pattern;
  if (request.pattern) {
    PSYCH_TRY(auto compiled, compile(*request.pattern, bounds));
    pattern = std::move(compiled);
  }
  line_scan scan(request, bounds, pattern.get());
  for (;;) {
    PSYCH_TRY(auto piece, source.next());
    if (piece.empty()) break;
    scan.feed(piece);
  }
  return std::move(scan).finish();
}

result<output_window> read_output(std::string_view bytes, const output_request& request,
                                  const output_bounds& bounds) {
  whole_source source(bytes);
  return read_output(source, request, bounds);
}

}  // namespace psych
