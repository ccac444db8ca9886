#include "channel.hpp"

#include <cerrno>

#include <unistd.h>

#include "platform/posix/retry.hpp"

namespace psych::launcher {

control_channel::control_channel(int fd)
    : fd_(fd), reader_(protocol::stream_bounds{.max_frame_bytes = control_frame_bytes}) {}

setup_result<std::optional<std::string>> control_channel::read_line() {
  while (lines_.empty()) {
    if (closed_) return std::optional<std::string>{};
    PSYCH_TRY(receive());
  }
  return next_line();
}

setup_result<bool> control_channel::receive() {
  if (closed_) return false;
  char buffer[64 * 1024];
  const ssize_t got = posix::retry_on_eintr([&] { return ::read(fd_, buffer, sizeof buffer); });
  if (got < 0) return fail(system_failure(launch_stage::control, "read", errno, "control fd"));
  const auto on_line = [this](std::string_view line) { lines_.emplace_back(line); };
  if (got == 0) {
    closed_ = true;
    // A half-written last frame is an error, not a frame.
    if (auto done = reader_.finish(); !done) return fail(from_error(launch_stage::protocol, done.error()));
    return false;
  }
  if (auto fed = reader_.feed(std::string_view(buffer, static_cast<std::size_t>(got)), on_line); !fed)
    return fail(from_error(launch_stage::protocol, fed.error()));
  return true;
}

std::optional<std::string> control_channel::next_line() {
  if (lines_.empty()) return std::nullopt;
  std::string line = std::move(lines_.front());
  lines_.pop_front();
  return line;
}

setup_result<void> control_channel::write_bytes(std::string_view bytes) {
  if (const auto put = posix::write_all(fd_, bytes.data(), bytes.size()); put.done < bytes.size())
    return fail(system_failure(launch_stage::control, "write", put.error != 0 ? put.error : EIO, "control fd"));
  return success();
}

}  // namespace psych::launcher
