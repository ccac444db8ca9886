#pragma once
// Between the bytes a program writes and the caller's output_sink (psych/host/live_output.hpp): a
// queue of at most a window of bytes and one thread that empties it into the sink. push() never
// blocks, whatever the sink does: it is called where the output is read (the session's event loop,
// the remote client's stream), which also keeps the clock. A push that does not fit is dropped;
// the sink learns of it from the next chunk's offset (`skipped`), or, at the end, from a last empty
// chunk that names what it missed of the stream's tail.
#include <array>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "psych/host/live_output.hpp"

namespace psych::host {

class live_output_relay {
 public:
  explicit live_output_relay(output_sink& sink, std::uint64_t window_bytes = live_output_window_bytes);
  live_output_relay(const live_output_relay&) = delete;
  live_output_relay& operator=(const live_output_relay&) = delete;
  /// finish() with the sizes pushed so far, if it was not called.
  ~live_output_relay();

  /// The bytes at `offset` of `stream`: queued, or dropped when the window cannot hold them.
  void push(output_stream stream, std::uint64_t offset, std::string_view data);
  /// Delivers what is queued; then, for a stream whose final size is beyond what the sink was shown,
  /// an empty chunk at that size saying how much it missed; returns when the sink has returned.
  void finish(std::uint64_t stdout_size, std::uint64_t stderr_size);

  /// Bytes dropped so far because the window was full (for tests and benchmarks).
  [[nodiscard]] std::uint64_t dropped_bytes() const;

 private:
  struct queued {
    output_stream stream;
    std::uint64_t offset;
    std::string data;
  };
  void deliver_all();
  void deliver(output_stream stream, std::uint64_t offset, std::string_view data);

  output_sink& sink_;
  const std::uint64_t window_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<queued> queue_;
  std::uint64_t held_ = 0;  ///< queued and in delivery
  std::uint64_t dropped_ = 0;
  std::array<std::uint64_t, 2> pushed_end_{};  ///< per stream, where the last push ended
  std::array<std::uint64_t, 2> final_size_{};
  bool finishing_ = false, finished_ = false;
  // Only the delivery thread touches this: per stream, where the last chunk the sink saw ended.
  std::array<std::uint64_t, 2> shown_end_{};
  bool sink_failed_ = false;  ///< the sink threw: it is called no more
  std::thread thread_;
};

}  // namespace psych::host
