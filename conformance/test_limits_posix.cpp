// The limits whose programs only POSIX can write: a file past RLIMIT_FSIZE, a fork bomb, and a
// grandchild that leaves its session (test_limits_windows.cpp has Windows' own).
#include <unistd.h>

#include <string>

#include "backends_posix.hpp"

using namespace psych;
using conformance::for_each_backend;

TEST_CASE("an oversized file ends at file_size_bytes") {
  for_each_backend([](sandbox& sb, const auto&) {
    const auto r = conformance::run(sb, "with open('big.bin', 'wb') as f:\n    f.write(b'x' * (4 << 20))\n",
                                    {.file_size_bytes = std::uint64_t{1} << 20});
    REQUIRE(r.failure);
    CHECK(r.limit_hit == limit_name::file_size_bytes);
    CHECK(r.failure->message.find("File too large") != std::string::npos);
  });
}

TEST_CASE("a memory limit below the interpreter's floor is a limit hit, never a failed launch") {
  // The interpreter dies at once, often before the launcher has put it in the execution's
  // cgroup; several runs, so that both sides of that race are met.
  for_each_backend([](sandbox& sb, const auto&) {
    for (int attempt = 0; attempt < 6; ++attempt) {
      CAPTURE(attempt);
      const auto r = conformance::run(sb, "return 1\n", {.memory_bytes = 1});
      REQUIRE(r.failure);
      INFO(r.failure->message);
      CHECK(r.failure->kind == failure_kind::limit_exceeded);
      CHECK(r.limit_hit == limit_name::memory_bytes);
    }
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
      CHECK_FALSE(conformance::process_running(daemon));
    }
    CHECK(r.problems.empty());
  });
}
