// Each limit, hit on purpose; the result names the cap that ended it.
#include <chrono>
#include <filesystem>
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

TEST_CASE("an oversized file ends at file_size_bytes") {
  for_each_backend([](sandbox& sb, const auto&) {
    const auto r = conformance::run(sb, "with open('big.bin', 'wb') as f:\n    f.write(b'x' * (4 << 20))\n",
                                    {.file_size_bytes = std::uint64_t{1} << 20});
    REQUIRE(r.failure);
    CHECK(r.limit_hit == limit_name::file_size_bytes);
    CHECK(r.failure->message.find("File too large") != std::string::npos);
  });
}

TEST_CASE("a fork bomb ends at process_count, and every process it made is gone") {
  for_each_backend([](sandbox& sb, const auto&) {
    const auto r = conformance::run(sb, R"(
import os, time
children = 0
while True:
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    children += 1
)",
                                    {.process_count = 8, .wall_seconds = 20.0});
    REQUIRE(r.failure);
    CHECK(r.limit_hit == limit_name::process_count);
    CHECK(r.failure->message.find("BlockingIOError") != std::string::npos);
    CHECK(r.duration_seconds < 15.0);
  });
}

TEST_CASE("a grandchild that calls setsid, double-forks and sleeps does not survive") {
  for_each_backend([](sandbox& sb, const auto& backend) {
    const auto r = conformance::run(sb, R"(
import os, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(w, str(os.getpid()).encode())
        os.close(w)
        time.sleep(60)
        os._exit(0)
    os._exit(0)
os.close(w)
pid = int(os.read(r, 32))
return {"daemon": pid}
)");
    REQUIRE_MESSAGE(r.ok(), r.failure->message);
    CHECK(r.guarantees.process_tree == enforcement::enforced);
    // Its pid came back; the launcher killed and reaped it before reporting.
    const auto& text = r.value->text;
    const auto digits = text.find_first_of("0123456789");
    REQUIRE(digits != std::string::npos);
    const auto daemon = std::stoi(text.substr(digits));
    // ISOLATED reports its namespace's pid; there, no process of the suite's uid may be left.
    if (conformance::isolated(backend)) {
      if (::geteuid() == 0 && !conformance::pooled(backend)) CHECK(conformance::processes_of(conformance::suite_uid).empty());
    } else {
      CHECK_FALSE(std::filesystem::exists("/proc/" + std::to_string(daemon)));
    }
    CHECK(r.problems.empty());
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
    const auto r = conformance::run(sb, "import time, subprocess\nsubprocess.Popen(['sleep', '60'])\ntime.sleep(60)\n",
                                    {}, source.get_token());
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
    REQUIRE(r.failure);
    CHECK(r.failure->kind == failure_kind::cancelled);
    CHECK(r.cancelled);
  });
}
