// Live output (docs/live-output.md): a program's output reaches the caller's sink while it runs,
// in order and at its offsets, on every backend; the result is what it is without a sink.
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "backends.hpp"
#include "psych/host/live_output.hpp"

// No `using namespace psych`: in the Windows project's unity sources it would make psych::windows
// collide with test_limits_windows.cpp's own `windows`.
using conformance::for_each_backend;
using psych::output_chunk;
using psych::output_sink;
using psych::output_stream;
using psych::sandbox;

namespace {

using clock_type = std::chrono::steady_clock;

/// What a sink saw: per stream the bytes in order (checked against the offsets), and when the first
/// chunk holding `marker` arrived.
class watching_sink : public output_sink {
 public:
  explicit watching_sink(std::string marker) : marker_(std::move(marker)) {}
  void on_output(const output_chunk& chunk) override {
    std::lock_guard lock(mutex_);
    auto& text = chunk.stream == output_stream::stdout_stream ? out : err;
    if (chunk.offset != text.size() + skipped) offsets_ok = false;
    skipped += chunk.skipped;
    text.append(chunk.data);
    if (!marker_seen && out.find(marker_) != std::string::npos) marker_seen = clock_type::now();
  }
  std::mutex mutex_;
  std::string out, err;
  std::uint64_t skipped = 0;
  bool offsets_ok = true;
  std::optional<clock_type::time_point> marker_seen;

 private:
  std::string marker_;
};

}  // namespace

TEST_CASE("live output: a line the program prints reaches the sink while it still runs") {
  for_each_backend([](sandbox& sb, const auto&) {
    // The line is printed, then the program sleeps: a sink that gets it only at the end gets it
    // after the sleep, when run() returns.
    const char* program =
        "import sys, time\nprint('first line')\nsys.stderr.write('to stderr\\n')\ntime.sleep(2.5)\n"
        "print('after the sleep')\nreturn 7";
    watching_sink sink("first line");
    const auto result = sb.run({.program = program, .terms = conformance::terms_for(sb), .live_output = &sink});
    const auto returned = clock_type::now();
    REQUIRE_MESSAGE(result.ok(), (result.failure ? result.failure->message : ""));
    CHECK(result.value->text == "7");
    REQUIRE(sink.marker_seen);
    CHECK_MESSAGE(returned - *sink.marker_seen > std::chrono::milliseconds(1500),
                  "the first line arrived only "
                      << std::chrono::duration<double>(returned - *sink.marker_seen).count()
                      << " s before run() returned");
    // Everything, in order, at its offsets; the result as it would be without a sink.
    CHECK(sink.offsets_ok);
    CHECK(sink.skipped == 0);
    CHECK(sink.out == "first line\nafter the sleep\n");
    CHECK(sink.err == "to stderr\n");
    CHECK(result.stdout_preview == sink.out);
    CHECK(result.stdout_size == sink.out.size());
    CHECK(result.stderr_size == sink.err.size());
  });
}

TEST_CASE("live output: output beyond max_bytes still streams whole, and the result is cut as always") {
  for_each_backend([](sandbox& sb, const auto&) {
    auto terms = conformance::terms_for(sb);
    terms.output.max_bytes = 1000;
    terms.output.preview_bytes = 100;
    watching_sink sink("never");
    const auto result = sb.run({.program = "import sys\nsys.stdout.write('y' * 200000)", .terms = terms,
                                .live_output = &sink});
    REQUIRE_MESSAGE(result.ok(), (result.failure ? result.failure->message : ""));
    CHECK(result.stdout_size == 200000);
    CHECK(result.stdout_data.size() <= 1000);
    CHECK(sink.offsets_ok);
    // The sink keeps up with 200 KB (far below the window), so it is shown every byte.
    CHECK(sink.out.size() + sink.skipped == 200000);
    CHECK(sink.skipped == 0);
  });
}
