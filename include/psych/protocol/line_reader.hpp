#pragma once
// The bounded NDJSON splitter of the launcher contract (docs/contract.md,
// "Framing"). Pure: it never reads a descriptor. Whoever drains a pipe or a
// socket feeds it the bytes as they arrive; it hands back one line at a time
// and enforces every stream bound *while* the bytes arrive, so a peer can
// never make it buffer more than one frame's ceiling.
//
// Zero-copy where it can be: a line wholly inside one fed chunk is handed out
// as a view into that chunk. Only a line split across feeds is buffered, and
// that buffer never holds more than max_frame_bytes.
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "psych/result.hpp"

namespace psych::protocol {

/// The ceilings of one stream. Defaults are the contract's (the control
/// channel uses max_frame_bytes = 1 MiB).
struct stream_bounds {
  /// Bytes of one line, excluding its '\n'.
  std::size_t max_frame_bytes = 16u << 20;
  /// Bytes of the whole stream, newlines included.
  std::uint64_t max_stream_bytes = 1ull << 30;
  /// Non-empty lines in the stream.
  std::uint64_t max_frames = 1'000'000;
  /// Empty lines in the stream (they carry nothing, so they are only tolerated).
  std::uint64_t max_empty_lines = 1'000;
};

/// What a line callback may return: nothing, or a result that stops the feed.
template <class OnLine>
concept line_callback =
    std::invocable<OnLine&, std::string_view> &&
    (std::is_void_v<std::invoke_result_t<OnLine&, std::string_view>> ||
     std::convertible_to<std::invoke_result_t<OnLine&, std::string_view>, result<void>>);

class line_reader {
 public:
  explicit line_reader(stream_bounds bounds = {}) noexcept : bounds_(bounds) {}

  /// Feed bytes as they arrive. Calls on_line(std::string_view) once per
  /// complete non-empty line, without its '\n' (a trailing '\r' is kept: JSON
  /// treats it as whitespace). The view is valid only during the call.
  ///
  /// Returns the first bound violation (frame_too_large, stream_too_large,
  /// too_many_frames, too_many_empty_lines), or the first failed result of
  /// on_line. Either way the reader is poisoned: every later feed() and
  /// finish() returns the same error. Lines completed before the violating
  /// byte have been delivered; nothing after it is looked at.
  ///
  /// If on_line throws, the exception propagates and the reader must be discarded.
  template <line_callback OnLine>
  result<void> feed(std::string_view bytes, OnLine&& on_line);

  /// End of stream: truncated_frame if a partial line is pending.
  result<void> finish() {
    if (poisoned_) return replay();
    if (!partial_.empty())
      return poison(error_kind::truncated_frame,
                    "the stream ended inside a frame (" + std::to_string(partial_.size()) +
                        " bytes without a newline)");
    return success();
  }

  /// Bytes of the pending partial line; never more than max_frame_bytes.
  [[nodiscard]] std::size_t buffered_bytes() const noexcept { return partial_.size(); }
  [[nodiscard]] std::uint64_t stream_bytes() const noexcept { return stream_bytes_; }
  [[nodiscard]] std::uint64_t frames() const noexcept { return frames_; }
  [[nodiscard]] std::uint64_t empty_lines() const noexcept { return empty_lines_; }
  [[nodiscard]] bool poisoned() const noexcept { return poisoned_.has_value(); }
  [[nodiscard]] const stream_bounds& bounds() const noexcept { return bounds_; }

 private:
  // A buffer that grew for one huge split line is given back afterwards, so
  // a long-lived reader does not keep 16 MiB for the rest of the stream.
  static constexpr std::size_t kept_capacity = std::size_t{1} << 20;

  template <class OnLine>
  result<void> deliver(std::string_view line, OnLine& on_line);

  result<void> poison(error_kind kind, std::string detail) {
    poisoned_ = error{kind, std::move(detail)};
    std::string{}.swap(partial_);
    return replay();
  }
  result<void> poison(const error& e) { return poison(e.kind, e.detail); }
  result<void> replay() const { return fail_with(poisoned_->kind, poisoned_->detail); }

  stream_bounds bounds_;
  std::string partial_;  ///< the start of a line split across feeds
  std::uint64_t stream_bytes_ = 0;
  std::uint64_t frames_ = 0;
  std::uint64_t empty_lines_ = 0;
  std::optional<error> poisoned_;
};

template <line_callback OnLine>
result<void> line_reader::feed(std::string_view bytes, OnLine&& on_line) {
  if (poisoned_) return replay();

  // The stream bound: look only at the bytes the stream may still carry;
  // the lines inside them are delivered, then the excess is the error.
  const std::uint64_t room = bounds_.max_stream_bytes - stream_bytes_;
  const bool over_stream = bytes.size() > room;
  if (over_stream) bytes = bytes.substr(0, static_cast<std::size_t>(room));
  stream_bytes_ += bytes.size();

  const char* p = bytes.data();
  const char* const end = p + bytes.size();
  while (p != end) {
    // The current line may take `budget` more bytes, then it must end. Search
    // only that far, so an endless line costs one bounded memchr, not a scan
    // of everything that happens to have arrived.
    const auto remaining = static_cast<std::size_t>(end - p);
    const std::size_t budget = bounds_.max_frame_bytes - partial_.size();
    const std::size_t window = std::min(remaining, budget);
    auto* nl = static_cast<const char*>(std::memchr(p, '\n', window));
    if (nl == nullptr) {
      if (remaining <= budget) {  // an incomplete line that still fits: keep it
        partial_.append(p, remaining);
        break;
      }
      if (p[budget] != '\n')
        return poison(error_kind::frame_too_large,
                      "a frame exceeds " + std::to_string(bounds_.max_frame_bytes) + " bytes");
      nl = p + budget;  // a line of exactly max_frame_bytes
    }

    if (partial_.empty()) {
      // The common case: the whole line is inside this chunk. No copy.
      const std::string_view line{p, static_cast<std::size_t>(nl - p)};
      p = nl + 1;
      PSYCH_TRY(deliver(line, on_line));
    } else {
      partial_.append(p, static_cast<std::size_t>(nl - p));
      p = nl + 1;
      PSYCH_TRY(deliver(partial_, on_line));
      if (partial_.capacity() > kept_capacity) std::string{}.swap(partial_);
      else partial_.clear();
    }
  }

  if (over_stream)
    return poison(error_kind::stream_too_large,
                  "the stream exceeds " + std::to_string(bounds_.max_stream_bytes) + " bytes");
  return success();
}

template <class OnLine>
result<void> line_reader::deliver(std::string_view line, OnLine& on_line) {
  if (line.empty()) {
    if (++empty_lines_ > bounds_.max_empty_lines)
      return poison(error_kind::too_many_empty_lines,
                    "more than " + std::to_string(bounds_.max_empty_lines) + " empty lines");
    return success();
  }
  if (++frames_ > bounds_.max_frames)
    return poison(error_kind::too_many_frames,
                  "more than " + std::to_string(bounds_.max_frames) + " frames");

  if constexpr (std::is_void_v<std::invoke_result_t<OnLine&, std::string_view>>) {
    on_line(line);
  } else {
    result<void> outcome = on_line(line);
    if (!outcome) return poison(outcome.error());
  }
  return success();
}

}  // namespace psych::protocol
