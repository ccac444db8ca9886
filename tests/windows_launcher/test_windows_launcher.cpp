// psych-launch-windows.exe, driven by a host under Wine from Linux, or natively on Windows (the same
// cases, host_os.hpp; docs/windows-launcher.md): the same expectations as the conformance cases, for
// a launcher whose interpreter is the contract-speaking test child (test_child/, beside this file).
// What Wine cannot show (its Job Object reads every limit back as 0) must then grade below
// ENFORCED; the cases that need the limit held are reported as a documented backend limit there,
// and run in full on real Windows.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>

#include "psych/grading.hpp"
#include "skip.hpp"
#include "test_child/observations.hpp"
#include "cases.hpp"
#include "launcher_host.hpp"

using namespace psych;
using namespace psych::testing::windows;
namespace child = psych::windows::test_child;

namespace {

/// The test child's observations, from its `done` value.
child::observations observations_of(const execution& e) {
  REQUIRE(e.done);
  REQUIRE(e.done->value);
  auto seen = protocol::decode_json<child::observations>(e.done->value->text);
  REQUIRE(seen);
  return seen.value();
}

/// Limits small enough for the test child's actions to cross them.
protocol::launch_frame tight_launch(const launch_dir& dir) {
  auto launch = default_launch(dir);
  launch.limits.cpu_seconds.value = 1;
  launch.limits.process_count.value = 3;
  return launch;
}

}  // namespace

TEST_CASE("the child runs in the job, and every grade is what the job read back") {
  if (!can_run()) return;
  launch_dir dir;
  const auto launch = default_launch(dir);
  const auto e = run_program(dir, launch, "print hello from the child");
  check_completed(e);
  if (const auto seconds = os::setup_seconds()) MESSAGE("the Wine prefix was made in " << *seconds << " s");
  MESSAGE("this launch took " << e.seconds << " s");
  const auto& applied = e.started->mechanisms;
  const auto& seen = e.hello->report;
  CHECK(e.hello->token == launch.token);
  CHECK(applied.job.in_job);
  CHECK(seen.job.in_job);
  CHECK(seen.pid == e.started->pid);
  CHECK(seen.cwd_is_workspace);
  if (applied.job.ui_restricted) CHECK(seen.job.ui_restricted);  // the UI query fails under Wine
  CHECK(seen.workspace_entries == 0);
  CHECK(e.stdout_text == "hello from the child\n");
  CHECK(e.stderr_text.find("hello from the child\n") != std::string::npos);
  CHECK(e.exit->exit_code == 0);

  {  // a limit the job reads back is the one asked for, and the child reads the same from inside
    for (const auto& [launcher, inside, asked] :
         {std::tuple{applied.job.cpu_seconds, seen.job.cpu_seconds, std::int64_t{10}},
          std::tuple{applied.job.memory_bytes, seen.job.memory_bytes, std::int64_t{256} << 20},
          std::tuple{applied.job.active_processes_limit, seen.job.active_processes_limit, std::int64_t{8}}}) {
      if (launcher == -1) continue;  // not held: graded below, never assumed
      CHECK(launcher == asked);
      CHECK(inside == launcher);
    }
  }

  {  // grades: ENFORCED only where the job read the limit back, never as asked
    // Under Wine the child also sees Wine's own loader variables (checked in the environment case).
    const auto grade = grade_of(launch, e);
    INFO("problems: " << joined(grade.problems));
    CHECK(grade.grades.identity == enforcement::unavailable);
    CHECK(grade.grades.filesystem == enforcement::unavailable);
    CHECK(grade.grades.file_size == enforcement::unavailable);
    const bool job_reads_back = applied.job.kill_on_close && applied.job.memory_bytes > 0 &&
                                applied.job.cpu_seconds > 0 && applied.job.active_processes_limit > 0;
    // Only Wine keeps no job limits: on Windows itself every one reads back.
    if (!os::under_wine()) CHECK(job_reads_back);
    if (job_reads_back) {
      // Real Windows: the Job Object holds the tree and its limits.
      CHECK(grade.achieved == isolation_level::process);
      CHECK(grade.grades.process_tree == enforcement::enforced);
      CHECK(grade.grades.cpu == enforcement::enforced);
      CHECK(grade.grades.memory == enforcement::enforced);
      CHECK(grade.grades.process_count == enforcement::enforced);
    } else {
      // Wine: the job reads back no limit, so none is graded as held, and PROCESS is not reached.
      MESSAGE("the job read back no limits (Wine): cpu, memory and process_count grade unavailable");
      CHECK(grade.grades.cpu != enforcement::enforced);
      CHECK(grade.grades.memory != enforcement::enforced);
      CHECK(grade.grades.process_count != enforcement::enforced);
      CHECK(grade.grades.process_tree != enforcement::enforced);
      CHECK_FALSE(grade.achieved);
    }
  }
}

TEST_CASE("the environment is exactly what launch gave") {
  if (!can_run()) return;
  launch_dir dir;
  const auto launch = default_launch(dir);
  const auto e = run_program(dir, launch, "");
  check_completed(e);
  std::set<std::string> given;
  for (const auto& [key, value] : launch.environment) given.insert(key);
  std::set<std::string> extra;
  for (const auto& key : e.hello->report.environment_keys) {
    if (given.erase(key) == 0 && !set_by_wine_itself(key)) extra.insert(key);
    // The launcher's own variables, the secret first, never reach the child.
    CHECK(key.find("PSYCH_HOST") == std::string::npos);
    CHECK(key != "WINEPREFIX");
    CHECK(key != "PATH");
  }
  CHECK(given.empty());  // every variable of launch arrived
  CHECK(extra.empty());  // and nothing else but what Wine's loader adds to every process
}

TEST_CASE("only the listed handles are inherited") {
  if (!can_run()) return;
  launch_dir dir;
  const auto e = run_program(dir, default_launch(dir), "handles");
  check_completed(e);
  const auto census = observations_of(e).handles;
  CHECK(census.sockets == 1);     // the channel, made from the launcher's share
  CHECK(census.stdin_bytes == 0);  // stdin is NUL, not the launcher's own stdin
  for (const auto& file : census.disk_files) {
    INFO("open file in the child: " << file);
    CHECK(file.find("decoy") == std::string::npos);
  }
  std::string files;
  for (const auto& file : census.disk_files) files += file + "; ";
  INFO("open files in the child: " << files);
  // At most its working directory: the launcher's stdin is an inheritable file handle (so under
  // Wine too), which only the handle list keeps out.
  CHECK(census.disk_files.size() <= 1);
}

TEST_CASE("the tree is killed with the job and verified empty") {
  if (!can_run()) return;
  launch_dir dir;
  SUBCASE("descendants left behind when the child exits") {
    const auto e = run_program(dir, default_launch(dir), "spawn 3 60");
    check_completed(e);
    CHECK(observations_of(e).actions.at(0).count == 3);
    CHECK(e.exit->killed == 3);
    CHECK(e.exit->survivors == 0);
    CHECK_FALSE(e.exit->limit_hit);
    CHECK(e.seconds < 30);  // the sleepers' 60 s did not hold the execution
  }
  SUBCASE("the wall clock ends the child and its descendants") {
    auto launch = default_launch(dir);
    // Long enough for Wine to start both descendants on a busy machine before the clock ends it.
    launch.limits.wall_seconds.value = 4;
    const auto e = run_program(dir, launch, "spawn 2 60\nsleep 60");
    check_completed(e);
    CHECK_FALSE(e.done);
    CHECK(e.exit->limit_hit == limit_name::wall_seconds);
    CHECK(e.exit->killed == 2);
    CHECK(e.exit->wall_seconds >= 4);
    CHECK(e.exit->wall_seconds < 12);
  }
  SUBCASE("a cancel ends it and is answered with exit") {
    const auto e = run_program(dir, default_launch(dir), "sleep 60", {.cancel_after = 500ms});
    check_completed(e);
    CHECK(e.exit->cancelled);
    CHECK_FALSE(e.exit->limit_hit);
  }
  SUBCASE("a cancel in the same write as the launch is not lost") {
    const auto e = run_program(dir, default_launch(dir), "sleep 60", {.cancel_with_launch = true});
    REQUIRE(e.exit);
    CHECK(e.exit->cancelled);
    CHECK(e.exit->wall_seconds < 5);
  }
}

TEST_CASE("when the host goes away, the launcher ends the tree and exits 1 without exit") {
  if (!can_run()) return;
  launch_dir dir;
  // The sleepers' seconds are unique to this case: the host finds their command lines by it.
  constexpr std::string_view marker = "71.250000";
  const auto e = run_program(dir, default_launch(dir), "spawn 2 71.25\nsleep 60", {.host_leaves_after = 200ms, .watched_marker = std::string(marker), .watched_count = 2});
  REQUIRE(e.started);
  CHECK(e.watched_before_leaving == 2);
  CHECK(e.launcher_status == 1);
  CHECK_FALSE(e.exit);
  const auto survivors = wait_until_gone(marker, 5s);
  CHECK(survivors.empty());
  // A failed case leaves nothing behind: what this test started is ended by pid.
  for (const auto process : survivors) os::kill_process(process);
}

TEST_CASE("when the launcher itself dies, the last handle to its job closes and the tree ends with it") {
  if (!can_run()) return;
  launch_dir dir;
  constexpr std::string_view marker = "72.250000";
  const auto e = run_program(dir, default_launch(dir), "spawn 2 72.25\nsleep 60", {.launcher_killed_after = 200ms, .watched_marker = std::string(marker), .watched_count = 2});
  REQUIRE(e.started);
  CHECK(e.watched_before_leaving == 2);
  CHECK(e.launcher_status == -1);
  const auto survivors = wait_until_gone(marker, 5s);
  if (!survivors.empty() && !e.started->mechanisms.job.kill_on_close) {
    // Processes this test started: end them by pid, then say why the case could not hold.
    for (const auto process : survivors) os::kill_process(process);
    psych::testing::skip_case(psych::testing::allowed_in_ci::documented_backend_limit,
                              "kill-on-close reads back unset under Wine, and Wine did not end the tree when the "
                              "launcher died (docs/windows-launcher.md)");
    return;
  }
  CHECK(survivors.empty());
  for (const auto process : survivors) os::kill_process(process);
}

TEST_CASE("breakaway is refused, and memory past the job's limit ends the program with the right outcome") {
  if (!can_run()) return;
  launch_dir dir;
  const auto launch = tight_launch(dir);
  // One run for both: a refused breakaway does not end the program, a failed commit does.
  const auto e = run_program(dir, launch, "breakaway\nallocate 536870912");
  check_completed(e);
  const auto& job = e.started->mechanisms.job;
  {  // breakaway is refused
    const auto seen = observations_of(e);
    REQUIRE_FALSE(seen.actions.empty());
    if (!os::under_wine()) CHECK(job.breakaway_forbidden);  // the flags read back on Windows itself
    if (job.breakaway_forbidden) CHECK_FALSE(seen.actions.at(0).ok);
    else if (seen.actions.at(0).ok)
      psych::testing::skip_case(psych::testing::allowed_in_ci::documented_backend_limit,
                                "the Job Object reads back no flags (Wine), and Wine let a process break away");
  }
  {  // memory: a commit past the job's limit fails, and the child names memory_bytes
    if (!job_holds_limit(job.memory_bytes, "memory limit")) return;
    REQUIRE(e.done);
    REQUIRE(e.done->error);
    CHECK(e.done->error->limit_hint == "memory_bytes");
  }
}

TEST_CASE("process_count: a process past the job's active process limit is refused, and the child names it") {
  if (!can_run()) return;
  launch_dir dir;
  const auto e = run_program(dir, tight_launch(dir), "spawn 5 30");
  check_completed(e);
  if (!job_holds_limit(e.started->mechanisms.job.active_processes_limit, "active process limit")) return;
  REQUIRE(e.done);
  REQUIRE(e.done->error);
  CHECK(e.done->error->limit_hint == "process_count");
}

TEST_CASE("cpu_seconds: the job ends a tree that spins past it, and exit says cpu_seconds") {
  if (!can_run()) return;
  launch_dir dir;
  const auto e = run_program(dir, tight_launch(dir), "spin 3");
  check_completed(e);
  if (!job_holds_limit(e.started->mechanisms.job.cpu_seconds, "CPU time limit")) return;
  CHECK(e.exit->limit_hit == limit_name::cpu_seconds);
  CHECK_FALSE(e.done);
}

TEST_CASE("the transport: only a connection that proves the secret is accepted") {
  if (!can_run()) return;
  launch_dir dir;
  const auto e = run_program(dir, default_launch(dir), "", {.impostor_secret = std::string(32, '0')});
  check_completed(e);
  CHECK(e.dropped_connections == 1);
}

TEST_CASE("a launch the Windows launcher does not offer is refused before anything runs") {
  if (!can_run()) return;
  launch_dir dir;
  auto launch = default_launch(dir);
  SUBCASE("isolation=isolated") {
    launch.isolation = isolation_level::isolated;
    const auto e = run_program(dir, launch, "");
    REQUIRE(e.error);
    CHECK(e.error->stage == protocol::launch_stage::isolation);
    CHECK(e.launcher_status == 2);
  }
  SUBCASE("another account (run_as)") {
    launch.run_as = protocol::identity{.uid = 1500000, .gid = 1500000};
    const auto e = run_program(dir, launch, "");
    REQUIRE(e.error);
    CHECK(e.error->stage == protocol::launch_stage::identity);
  }
  SUBCASE("an interpreter that does not exist: the error names the call") {
    launch.interpreter = "C:\\\\no\\\\such\\\\python.exe";
    const auto e = run_program(dir, launch, "");
    REQUIRE(e.error);
    CHECK(e.error->stage == protocol::launch_stage::spawn);
    CHECK(e.error->syscall == "CreateProcessW");
    CHECK(e.launcher_status == 1);
  }
}
