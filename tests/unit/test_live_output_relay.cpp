// The live output relay (execution/live_output_relay.hpp): the sink sees each stream's bytes in
// order at their offsets; a sink that falls behind never makes push() wait, the relay holds at most
// its window, and the sink is told exactly how much it missed.
#include <doctest/doctest.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "execution/live_output_relay.hpp"

using namespace psych;
using psych::host::live_output_relay;

namespace {

struct seen_chunk {
  output_stream stream;
  std::uint64_t offset, skipped;
  std::string data;
};

/// Records every chunk; until open() is called, the first call waits (a sink that is behind).
class recording_sink : public output_sink {
 public:
  explicit recording_sink(bool start_blocked = false) : blocked_(start_blocked) {}
  void on_output(const output_chunk& chunk) override {
    std::unique_lock lock(mutex_);
    opened_.wait(lock, [this] { return !blocked_; });
    chunks.push_back({chunk.stream, chunk.offset, chunk.skipped, std::string(chunk.data)});
  }
  void open() {
    {
      std::lock_guard lock(mutex_);
      blocked_ = false;
    }
    opened_.notify_all();
  }
  std::vector<seen_chunk> chunks;

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  bool blocked_;
};

}  // namespace

TEST_CASE("live output: each stream's bytes reach the sink in order, at their offsets") {
  recording_sink sink;
  {
    live_output_relay relay(sink);
    relay.push(output_stream::stdout_stream, 0, "one\n");
    relay.push(output_stream::stderr_stream, 0, "err");
    relay.push(output_stream::stdout_stream, 4, "two\n");
    relay.finish(8, 3);
  }
  REQUIRE(sink.chunks.size() == 3);
  std::string out, err;
  for (const auto& c : sink.chunks) {
    CHECK(c.skipped == 0);
    auto& text = c.stream == output_stream::stdout_stream ? out : err;
    CHECK(c.offset == text.size());
    text += c.data;
  }
  CHECK(out == "one\ntwo\n");
  CHECK(err == "err");
}

TEST_CASE("live output: a sink that falls behind is skipped forward, never waited for, and told how much") {
  recording_sink sink(/*start_blocked=*/true);
  live_output_relay relay(sink, /*window_bytes=*/1000);
  const std::string block(300, 'x');
  std::uint64_t offset = 0;
  // The sink is stuck in its first call: these return at once whatever it does (the test would hang
  // otherwise), and what the window cannot hold is dropped.
  for (int i = 0; i < 10; ++i, offset += block.size()) relay.push(output_stream::stdout_stream, offset, block);
  CHECK(relay.dropped_bytes() >= 3000 - 1000);
  sink.open();
  relay.finish(offset + 5, 0);  // five more bytes the relay never saw: a skipped tail

  std::uint64_t shown = 0, skipped = 0, expected_offset = 0;
  for (const auto& c : sink.chunks) {
    CHECK(c.offset == expected_offset + c.skipped);
    expected_offset = c.offset + c.data.size();
    shown += c.data.size();
    skipped += c.skipped;
  }
  CHECK(shown <= 1000);  // the window: the rest was dropped, not queued
  CHECK(shown + skipped == offset + 5);
  REQUIRE_FALSE(sink.chunks.empty());
  CHECK(sink.chunks.back().data.empty());  // the tail's own chunk, naming what was missed at the end
  CHECK(sink.chunks.back().offset == offset + 5);
}

TEST_CASE("live output: a sink that throws is shown nothing more, and the execution goes on") {
  struct throwing_sink : output_sink {
    int calls = 0;
    void on_output(const output_chunk&) override {
      ++calls;
      throw std::runtime_error("the caller's bug");
    }
  } sink;
  live_output_relay relay(sink);
  relay.push(output_stream::stdout_stream, 0, "a");
  relay.push(output_stream::stdout_stream, 1, "b");
  relay.finish(2, 0);
  CHECK(sink.calls == 1);
}

TEST_CASE("live output: a relay that was never finished finishes when it is destroyed") {
  recording_sink sink;
  {
    live_output_relay relay(sink);
    relay.push(output_stream::stderr_stream, 0, "late");
  }
  REQUIRE(sink.chunks.size() == 1);
  CHECK(sink.chunks[0].data == "late");
}
