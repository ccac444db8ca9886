#pragma once
// Live output: a program's stdout and stderr handed to the caller while it runs (docs/live-output.md).
// The result is not changed by it: its previews, sizes and handles are what they are without a
// sink. A sink is a push handler, as an Asio completion handler is: psych calls it from one thread
// of its own, one call at a time, in the order the bytes were written per stream, and never from
// the thread that keeps the execution's clock, so a slow sink can neither stall the program nor
// stretch its wall clock. It can fall behind, though: psych holds at most live_output_window_bytes
// for it per execution, and bytes that arrive while that window is full are skipped (never
// waited for); the next chunk of that stream says how many.
#include <cstdint>
#include <string_view>

#include "psych/names.hpp"

namespace psych {

enum class output_stream { stdout_stream, stderr_stream };
PSYCH_ENUM_NAMES(output_stream, "stdout", "stderr");

/// The most psych holds per execution for a sink that has not yet taken it: queued and in delivery,
/// both streams together. A host that relays the output again (psych serve) holds at most as much
/// more on its own side.
inline constexpr std::uint64_t live_output_window_bytes = std::uint64_t{1} << 20;

/// Bytes of one stream as they arrived.
struct output_chunk {
  output_stream stream = output_stream::stdout_stream;
  /// Where `data` starts in the stream, counting every byte the program wrote to it.
  std::uint64_t offset = 0;
  /// Valid only during the call. Empty in a stream's last chunk when its tail was skipped.
  std::string_view data;
  /// Bytes of this stream just before `offset` that this sink was not shown, because it was behind
  /// (they are in the result, as captured output always is).
  std::uint64_t skipped = 0;
};

class output_sink {
 public:
  virtual ~output_sink() = default;
  /// Called on psych's delivery thread; run() returns only after the last call has returned.
  virtual void on_output(const output_chunk& chunk) = 0;
};

}  // namespace psych
