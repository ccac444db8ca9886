#include "service/live_output_frames.hpp"

#include "http/base64.hpp"
#include "psych/host/remote_protocol.hpp"

namespace psych::host {

void live_output_frames::on_output(const output_chunk& chunk) {
  const std::uint64_t bytes = chunk.data.size();
  {
    std::lock_guard lock(mutex_);
    if (bytes != 0 && waiting_ + bytes > window_) return;  // skipped: the next frame's offset says so
    waiting_ += bytes;
  }
  send_(protocol::encode_frame(remote::live_output_frame{
            .stream = chunk.stream, .offset = chunk.offset, .data = base64_encode(chunk.data)}),
        bytes);
}

void live_output_frames::sent(std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  waiting_ -= std::min(waiting_, bytes);
}

}  // namespace psych::host
