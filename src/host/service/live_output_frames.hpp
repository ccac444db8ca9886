#pragma once
// Version 2's live output on the service's side: the program's output, as the backend's sink
// receives it, made `live_output` frames for the execution's stream. The client may read slower
// than the program writes: at most live_output_window_bytes of output wait in the stream's outbox,
// and a chunk that does not fit is skipped, never waited for (the client learns of the gap from
// the next frame's offset). The backend's own sink already holds the output apart from the clock.
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "psych/host/live_output.hpp"

namespace psych::host {

class live_output_frames final : public output_sink {
 public:
  /// `send(line, bytes)`: puts the frame in the client's stream (called on the backend's delivery
  /// thread); sent(bytes) must follow once it was written or dropped.
  using line_sender = std::function<void(std::string line, std::uint64_t bytes)>;
  explicit live_output_frames(line_sender send, std::uint64_t window_bytes = live_output_window_bytes)
      : send_(std::move(send)), window_(window_bytes) {}

  void on_output(const output_chunk& chunk) override;
  /// A frame's bytes left the outbox.
  void sent(std::uint64_t bytes);

 private:
  line_sender send_;
  const std::uint64_t window_;
  std::mutex mutex_;
  std::uint64_t waiting_ = 0;  ///< bytes of output in frames not yet written
};

}  // namespace psych::host
