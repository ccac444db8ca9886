// psych-launch-windows.exe with a real CPython as the interpreter: the launcher starts it as
// `python -I -S -c <loader> …`, the loader takes the channel and the precompiled bootstrap from
// the handover pipe (launchers/sandbox_runtime/bootstrap_loader_windows.py), and the bootstrap says hello,
// runs the program and answers done, as the conformance cases expect of every backend.
//
// PSYCH_WINDOWS_PYTHON names the interpreter, as the launcher sees the path. Under Wine there is
// none to be had (no Debian package ships a Windows CPython), so these cases skip there; on
// Windows itself (the CI matrix, scripts/test-windows-launcher) a missing one fails.
#include <doctest/doctest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "cases.hpp"
#include "launcher_host.hpp"

using namespace psych;
using namespace psych::testing::windows;

namespace {

/// One line of a program: a child interpreter that sleeps a minute, started as the program's own.
constexpr const char* start_sleeping_python =
    "subprocess.Popen([sys.executable, '-I', '-S', '-c', 'import time; time.sleep(60)'])\n";

std::optional<protocol::launch_frame> python_launch(const launch_dir& dir,
                                                    std::source_location where = std::source_location::current()) {
  if (!can_run(where)) return std::nullopt;
  const char* python = std::getenv("PSYCH_WINDOWS_PYTHON");
  if (python == nullptr || *python == '\0') {
    if (os::under_wine()) {
      psych::testing::skip_case(psych::testing::allowed_in_ci::no_windows_cpython_under_wine,
                                "PSYCH_WINDOWS_PYTHON names no Windows CPython, and none can be installed here "
                                "(docs/windows-launcher.md): the CI matrix's Windows job runs these cases",
                                where);
      return std::nullopt;
    }
    FAIL_CHECK("PSYCH_WINDOWS_PYTHON names no CPython: on Windows itself the cases with a real interpreter "
               "must run (scripts/test-windows-launcher sets it)");
    return std::nullopt;
  }
  auto launch = default_launch(dir);
  launch.interpreter = python;
  return launch;
}

}  // namespace

TEST_CASE("CPython: the bootstrap says hello from inside the job, runs the program and its value comes back") {
  launch_dir dir;
  const auto launch = python_launch(dir);
  if (!launch) return;
  const auto e = run_program(dir, *launch, "import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\n6 * 7");
  check_completed(e);
  MESSAGE("this launch took " << e.seconds << " s");
  REQUIRE(e.done);
  INFO("done: " << protocol::encode_frame(*e.done));
  CHECK(e.done->ok);
  REQUIRE(e.done->value);
  CHECK(e.done->value->text == "42");
  CHECK(e.stdout_text == "to stdout\n");
  CHECK(e.stderr_text.find("to stderr\n") != std::string::npos);
  CHECK(e.exit->exit_code == 0);

  const auto& applied = e.started->mechanisms;
  const auto& seen = e.hello->report;
  CHECK(e.hello->token == launch->token);
  CHECK(seen.pid == e.started->pid);
  CHECK_FALSE(seen.python.empty());
  CHECK(seen.job.in_job);
  CHECK(seen.cwd_is_workspace);
  CHECK(seen.workspace_entries == 0);
  for (const auto& key : seen.environment_keys) CHECK(key.find("PSYCH_HOST") == std::string::npos);

  const auto grade = grade_of(*launch, e);
  INFO("problems: " << joined(grade.problems));
  CHECK(grade.grades.identity == enforcement::unavailable);
  CHECK(grade.grades.filesystem == enforcement::unavailable);
  if (!os::under_wine()) {
    // What the child read of its own job is what the launcher read back: the job holds the tree.
    CHECK(seen.job.kill_on_close == applied.job.kill_on_close);
    CHECK(seen.job.memory_bytes == applied.job.memory_bytes);
    CHECK(seen.job.active_processes_limit == applied.job.active_processes_limit);
    CHECK(grade.achieved == isolation_level::process);
    CHECK(grade.grades.process_tree == enforcement::enforced);
    CHECK(grade.grades.memory == enforcement::enforced);
    CHECK(grade.grades.process_count == enforcement::enforced);
  }
}

TEST_CASE("CPython: an exception comes back as data, with its type and traceback") {
  launch_dir dir;
  const auto launch = python_launch(dir);
  if (!launch) return;
  const auto e = run_program(dir, *launch, "x = 1\nraise ValueError('no such thing')");
  check_completed(e);
  REQUIRE(e.done);
  CHECK_FALSE(e.done->ok);
  REQUIRE(e.done->error);
  CHECK(e.done->error->type == "ValueError");
  CHECK(e.done->error->message == "no such thing");
  CHECK(e.done->error->line == 2);
  CHECK(e.done->error->traceback.find("ValueError") != std::string::npos);
}

TEST_CASE("CPython: the wall clock ends a program that never returns, and the processes it started") {
  launch_dir dir;
  auto launch = python_launch(dir);
  if (!launch) return;
  launch->limits.wall_seconds.value = 5;
  const auto e = run_program(dir, *launch,
                             std::string("import subprocess, sys\n") + start_sleeping_python + "while True:\n    pass\n");
  check_completed(e);
  CHECK_FALSE(e.done);
  CHECK(e.exit->limit_hit == limit_name::wall_seconds);
  CHECK(e.exit->killed >= 1);
  CHECK(e.exit->wall_seconds < 15);
}

TEST_CASE("CPython: a process past the job's active process limit is refused, and the failure names process_count") {
  launch_dir dir;
  auto launch = python_launch(dir);
  if (!launch) return;
  launch->limits.process_count.value = 3;
  const auto e = run_program(dir, *launch,
                             std::string("import subprocess, sys\nfor _ in range(6):\n    ") + start_sleeping_python);
  check_completed(e);
  if (!job_holds_limit(e.started->mechanisms.job.active_processes_limit, "active process limit")) return;
  REQUIRE(e.done);
  REQUIRE(e.done->error);
  CHECK(e.done->error->limit_hint == "process_count");
  CHECK(e.exit->survivors == 0);
}
