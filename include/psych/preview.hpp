#pragma once
// The model's view of a stream: a deterministic head-and-tail preview. The
// same bytes always give the same preview, the cut never splits a UTF-8
// character, and the marker says how much was left out (of what was
// captured, and of what was produced beyond the capture).
#include <cstdint>
#include <string>
#include <string_view>

#include "psych/utf8.hpp"

namespace psych {

/// A preview and how many of the item's bytes it shows.
struct preview_cut {
  std::string text;
  std::uint64_t kept_bytes = 0;  ///< bytes of the item shown in `text` (head and tail)
};

/// `captured`: the bytes a backend kept; `produced`: how many the program wrote.
inline preview_cut cut_preview(std::string_view captured, std::uint64_t produced, std::uint64_t preview_bytes) {
  if (captured.size() <= preview_bytes && produced <= captured.size())
    return {utf8::sanitize(captured), captured.size()};
  const std::size_t budget = static_cast<std::size_t>(std::min<std::uint64_t>(preview_bytes, captured.size()));
  const std::size_t head_end = utf8::floor_boundary(captured, budget - budget / 3);
  const std::size_t tail_start = std::max(head_end, utf8::ceil_boundary(captured, captured.size() - budget / 3));
  const std::uint64_t kept = head_end + (captured.size() - tail_start);
  const std::uint64_t omitted = produced - kept;
  std::string out = utf8::sanitize(captured.substr(0, head_end));
  out.append("\n[... ").append(std::to_string(omitted)).append(" bytes omitted");
  if (produced > captured.size())
    out.append(", ").append(std::to_string(produced - captured.size())).append(" of them never captured");
  out.append(" ...]\n");
  out.append(utf8::sanitize(captured.substr(tail_start)));
  return {std::move(out), kept};
}

inline std::string make_preview(std::string_view captured, std::uint64_t produced, std::uint64_t preview_bytes) {
  return cut_preview(captured, produced, preview_bytes).text;
}

}  // namespace psych
