// The limits whose programs are Windows' own (test_limits_posix.cpp has POSIX's): a spawn bomb
// stopped by the job's active process limit, and a grandchild that detaches from the console, starts
// a process group of its own and asks to break away from the job, none of which outlives the run.
// There is no file size cap on Windows to hit (docs/windows-launcher.md: file_size is UNAVAILABLE).
#include <string>

#include "backends.hpp"

using namespace psych;
using conformance::for_each_backend;

namespace {

bool windows_backend(const conformance::backend_under_test& backend) { return conformance::on_windows(backend); }

}  // namespace

TEST_CASE("a spawn bomb ends at process_count, and every process it made is gone") {
  for_each_backend(windows_backend, [](sandbox& sb, const auto&) {
    const auto r = conformance::run(sb, R"PY(
import subprocess, sys
children = []
while True:
    children.append(subprocess.Popen([sys.executable, "-I", "-S", "-c", "import time; time.sleep(30)"]))
)PY",
                                    {.process_count = 8, .wall_seconds = 20.0});
    REQUIRE(r.failure);
    INFO(r.failure->message);
    CHECK(r.limit_hit == limit_name::process_count);
    CHECK(r.failure->kind == failure_kind::exception);
    CHECK(r.failure->message.find("1816") != std::string::npos);  // ERROR_NOT_ENOUGH_QUOTA
    CHECK(r.duration_seconds < 15.0);
  });
}

TEST_CASE("a grandchild that detaches, leaves the process group and asks to break away does not survive") {
  for_each_backend(windows_backend, [](sandbox& sb, const auto&) {
    const auto r = conformance::run(sb, R"PY(
import subprocess, sys
sleeper = [sys.executable, "-I", "-S", "-c", "import time; time.sleep(60)"]
detached = subprocess.DETACHED_PROCESS | subprocess.CREATE_NEW_PROCESS_GROUP
try:
    subprocess.Popen(sleeper, creationflags=detached | subprocess.CREATE_BREAKAWAY_FROM_JOB)
    breakaway = "started"
except OSError as error:
    breakaway = error.winerror
daemon = subprocess.Popen(sleeper, creationflags=detached)
return {"breakaway": breakaway, "daemon": daemon.pid}
)PY");
    REQUIRE_MESSAGE(r.ok(), r.failure->message);
    CHECK(r.guarantees.process_tree == enforcement::enforced);
    const auto& text = r.value->text;
    INFO(text);
    // The job forbids breaking away: CreateProcess refuses with ERROR_ACCESS_DENIED.
    CHECK(text.find(R"("breakaway":5)") != std::string::npos);
    const auto at = text.find(R"("daemon":)");
    REQUIRE(at != std::string::npos);
    const auto daemon = std::stoll(text.substr(at + 9));
    // The launcher closed the job and saw it empty before it reported.
    CHECK_FALSE(conformance::process_running(daemon));
    // Windows' own problems stay (the canary is the same account's to read); none is the tree's.
    for (const auto& problem : r.problems) CHECK_MESSAGE(problem.find("process_tree") == std::string::npos, problem);
  });
}
