#pragma once
// The control channel (fd 3): blocking NDJSON frames between host and
// launcher. Reads go through the bounded line_reader, so a host that sends an
// endless line is refused as the bytes arrive, at 1 MiB, never after a
// megabyte-sized allocation has already happened.
#include <cstddef>
#include <deque>
#include <optional>
#include <string>

#include "setup_error.hpp"
#include "psych/protocol/json.hpp"
#include "psych/protocol/line_reader.hpp"

namespace psych::launcher {

/// The control channel's frame ceiling (docs/contract.md: control frames are 1 MiB).
inline constexpr std::size_t control_frame_bytes = std::size_t{1} << 20;

class control_channel {
 public:
  explicit control_channel(int fd);

  [[nodiscard]] int fd() const noexcept { return fd_; }

  /// Blocks until one whole line has arrived. nullopt: the host closed the channel first.
  setup_result<std::optional<std::string>> read_line();

  /// One read(): call it when poll() says the fd is readable. Whole lines are queued for
  /// next_line(). Returns false once the host has closed its end (EOF).
  setup_result<bool> receive();

  [[nodiscard]] bool has_line() const noexcept { return !lines_.empty(); }

  /// The oldest queued line, if any.
  std::optional<std::string> next_line();

  /// Writes one frame (encode_frame ends it with '\n'), retrying short writes.
  template <class Frame>
  setup_result<void> write(const Frame& frame) {
    return write_bytes(protocol::encode_frame(frame));
  }

 private:
  setup_result<void> write_bytes(std::string_view bytes);

  int fd_;
  protocol::line_reader reader_;
  std::deque<std::string> lines_;
  bool closed_ = false;
};

}  // namespace psych::launcher
