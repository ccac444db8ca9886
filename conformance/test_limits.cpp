// Each limit, hit on purpose; the result names the cap that ended it. The caps whose programs are
// the platform's own (a fork bomb, a double-forked daemon, a file past RLIMIT_FSIZE) are in
// test_limits_posix.cpp and test_limits_windows.cpp.
#include <chrono>
#include <thread>

#include "backends.hpp"

using namespace psych;
using conformance::for_each_backend;

TEST_CASE("CPU spin ends at cpu_seconds") {
  for_each_backend([](sandbox& sb, const auto&) {
    const auto r = conformance::run(sb, "while True:\n    pass\n", {.cpu_seconds = 1.0, .wall_seconds = 15.0});
    REQUIRE(r.failure);
    CHECK(r.limit_hit == limit_name::cpu_seconds);
    CHECK(r.failure->kind == failure_kind::limit_exceeded);
    CHECK(r.duration_seconds < 10.0);
  });
}

TEST_CASE("sleep ends at the wall clock, and the tree is killed") {
  for_each_backend([](sandbox& sb, const auto&) {
    const auto r = conformance::run(sb, "import time\nprint('sleeping', flush=True)\ntime.sleep(60)\n",
                                    {.wall_seconds = 1.0});
    REQUIRE(r.failure);
    CHECK(r.failure->kind == failure_kind::timeout);
    CHECK(r.limit_hit == limit_name::wall_seconds);
    CHECK(r.duration_seconds >= 1.0);
    CHECK(r.duration_seconds < 5.0);
    CHECK(r.stdout_data == "sleeping\n");  // output before the kill is kept
  });
}

TEST_CASE("a memory balloon ends at memory_bytes, as MemoryError") {
  for_each_backend([](sandbox& sb, const auto&) {
    const auto r = conformance::run(sb, "chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))\n",
                                    {.memory_bytes = std::uint64_t{256} << 20});
    REQUIRE(r.failure);
    CHECK(r.limit_hit == limit_name::memory_bytes);
    CHECK(r.failure->kind == failure_kind::exception);
    CHECK(r.failure->message.find("MemoryError") != std::string::npos);
    CHECK(r.guarantees.memory != enforcement::unavailable);
  });
}

TEST_CASE("caller cancellation kills the tree and reports cancelled") {
  for_each_backend([](sandbox& sb, const auto&) {
    std::stop_source source;
    std::jthread canceller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(700));
      source.request_stop();
    });
    const auto started = std::chrono::steady_clock::now();
    const auto r = conformance::run(sb, "import subprocess, sys, time\n"
                                    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                                    "time.sleep(60)\n",
                                    {}, source.get_token());
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
    REQUIRE(r.failure);
    CHECK(r.failure->kind == failure_kind::cancelled);
    CHECK(r.cancelled);
  });
}
