#pragma once
// read_tool_output: a preserved result read by line window or by regular expression, never
// re-inserted whole. Both are bounded: a window by lines and bytes, a search by the number of
// matches, the bytes returned, and the regular-expression engine (RE2: linear time in the input,
// a memory budget for the compiled pattern), so a hostile pattern gets a named error, never a hang.
// The output is read front to back a piece at a time (output_source), so memory is bounded by the
// window, one piece and one line's kept head, never by the size of the output.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/hana/adapt_struct.hpp>

#include "psych/result.hpp"

namespace psych {

/// What to read: a line window (`offset` lines skipped, at most `limit` lines), or, when
/// `pattern` is set, the lines matching it (at most `limit` of them, from line `offset` on).
struct output_request {
  std::uint64_t offset = 0;
  std::uint64_t limit = 100;
  std::optional<std::string> pattern;
};

struct output_line {
  std::uint64_t number = 0;  ///< 0-based line index in the whole output
  std::string text;          ///< without its newline; valid UTF-8 (invalid bytes replaced)
};

struct output_window {
  std::vector<output_line> lines;
  std::uint64_t total_lines = 0;           ///< lines in the whole output
  std::uint64_t total_bytes = 0;
  std::optional<std::uint64_t> next_offset;  ///< where the next window starts, if anything is left
  bool line_truncated = false;             ///< some line was longer than the per-line cap and was cut
  bool search_cut = false;  ///< some line searched was longer than max_search_line_bytes: only its head was searched
};

/// The bounds. A window whose text would pass `max_bytes` is refused (`output_window_too_large`),
/// not cut, unless `cut_to_fit` is set, in which case it ends early and `next_offset` says where.
struct output_bounds {
  std::uint64_t max_lines = 1000;
  std::uint64_t max_bytes = std::uint64_t{64} << 10;
  std::uint64_t max_line_bytes = std::uint64_t{4} << 10;  ///< a longer line is cut, and says so
  std::uint64_t max_pattern_bytes = 1024;
  std::int64_t max_pattern_memory = std::int64_t{1} << 20;  ///< RE2's budget for the compiled pattern
  /// A pattern sees at most this much of each line (its head): RE2 needs a line whole, and a line
  /// may be as long as the output, so this is the fixed buffer a search holds.
  std::uint64_t max_search_line_bytes = std::uint64_t{1} << 20;
  bool cut_to_fit = true;
};

/// Where read_output's bytes come from, front to back, a piece at a time.
class output_source {
 public:
  virtual ~output_source() = default;
  /// The next piece of the output, valid until the next call; empty only at the end.
  virtual result<std::string_view> next() = 0;
};

/// One window of the output `source` holds, read through once. Errors: those of the source, and
/// those of the string_view overload below.
result<output_window> read_output(output_source& source, const output_request& request,
                                  const output_bounds& bounds = {});

/// Pure: one window of `bytes`. Errors: `output_pattern_rejected` for a pattern RE2 rejects
/// (detail "invalid: ..."), one longer than max_pattern_bytes ("too long: ..."), or one whose
/// compiled form passes the memory budget ("too complex: ..."); `output_window_too_large` as above.
result<output_window> read_output(std::string_view bytes, const output_request& request,
                                  const output_bounds& bounds = {});

}  // namespace psych

// A window travels as JSON: to a program (the binding gateway) and to a model (psych mcp).
BOOST_HANA_ADAPT_STRUCT(psych::output_line, number, text);
BOOST_HANA_ADAPT_STRUCT(psych::output_window, lines, total_lines, total_bytes, next_offset, line_truncated,
                        search_cut);
