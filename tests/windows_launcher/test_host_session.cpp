// psych's own host (src/host/execution/session.cpp) driving psych-launch-windows.exe over the loopback
// transport (src/host/execution/loopback_attach.hpp; docs/contract.md, "Channels on Windows"): the session's
// listener, the proof of the secret, control before `launch` and the channel after `started`, and
// grading the job the launcher and the child read back. The interpreter is the contract-speaking
// test child, which the launcher starts as it starts CPython. Compiled into both test hosts: the
// Linux one starts the launcher under Wine (session_host_wine.cpp), and in
// psych-windows-launcher-tests.exe the session is itself a Windows program and starts the launcher
// with its own local_launcher (session_host_windows.cpp). Launchers that break the transport are
// tests/unit/test_session_loopback.cpp's.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "cases.hpp"
#include "execution/session.hpp"
#include "session_host.hpp"

using namespace psych;
using namespace psych::testing::windows;

namespace {

host::session_plan plan_for(const os::session_launch& launch, std::string program) {
  host::session_plan plan;
  plan.starter = launch.starter.get();
  plan.launcher_path = launch.launcher_path;
  plan.temp_root = launch.temp_root;
  plan.interpreter = launch.interpreter;
  plan.program = std::move(program);
  plan.allow_same_uid = true;  // the Windows launcher has no other account to run the child as
  plan.environment = {{"SystemRoot", launch.system_root}};
  plan.terms.limits.wall_seconds.value = 30;
  plan.terms.limits.process_count.value = 8;
  plan.terms.limits.address_space_bytes.value = std::uint64_t{256} << 20;
  return plan;
}

/// Whether the job read back the limits it was given (Windows itself); under Wine it reads none.
bool job_holds_limits(const host::session_outcome& outcome) {
  const auto& job = outcome.mechanisms->job;
  return job.memory_bytes > 0 && job.active_processes_limit > 0 && job.cpu_seconds > 0;
}

}  // namespace

TEST_CASE("psych's host: the session attaches the Windows launcher over loopback and grades what its job read back") {
  if (!can_run()) return;
  const auto launch = os::launch_for_session();
  const auto plan = plan_for(launch, "print hello from the child");
  const auto outcome = host::run_session(plan, {});
  const auto& result = outcome.result;
  INFO("failure: " << (result.failure ? result.failure->message : "none") << "; problems: " << joined(result.problems)
                   << "; stderr: " << result.stderr_data);
  REQUIRE(outcome.mechanisms);  // control attached, launch went out, started came back
  CHECK(outcome.mechanisms->job.in_job);
  CHECK(outcome.mechanisms->environment_built);
  CHECK(result.guarantees.identity == enforcement::unavailable);
  CHECK(result.guarantees.filesystem == enforcement::unavailable);
  if (job_holds_limits(outcome)) {
    // A Job Object that holds its limits (Windows itself): PROCESS, and the program ran.
    CHECK(result.isolation == isolation_level::process);
    CHECK(outcome.program_started);
    CHECK(result.stdout_data == "hello from the child\n");
  } else {
    // Wine keeps no job limits: the channel attached and hello was graded, and the session refused
    // to run the program at PROCESS, saying why, instead of assuming the limits held.
    MESSAGE("the job read back no limits (Wine): the session refused the program at isolation=process");
    CHECK_FALSE(result.isolation);
    CHECK_FALSE(outcome.program_started);
    REQUIRE(result.failure);
    CHECK(result.failure->kind == failure_kind::isolation_unavailable);
    CHECK(result.failure->message.find("isolation=process") != std::string::npos);
    CHECK(result.guarantees.memory != enforcement::enforced);
    CHECK(result.guarantees.process_count != enforcement::enforced);
    CHECK(result.stdout_data.empty());
  }
  // The launcher ended the child (aborted or done) and reported it: no problem with the launcher
  // itself ("the launcher exited with status 1", "the launcher ended without an exit report").
  for (const auto& problem : result.problems) CHECK_FALSE(problem.starts_with("the launcher"));
  // What the launch gave the child is expected of it: only Wine's own loader variables are extra.
  constexpr std::string_view unexpected = "environment: unexpected variables reached the child: ";
  for (const auto& problem : result.problems)
    if (problem.starts_with(unexpected)) {
      const std::string extra = problem.substr(unexpected.size());
      for (std::size_t at = 0; at < extra.size();) {
        const auto end = std::min(extra.find(", ", at), extra.size());
        CHECK(set_by_wine_itself(extra.substr(at, end - at)));
        at = end + 2;
      }
    }
}

TEST_CASE("psych's host: describe() over loopback reports the Windows launcher's grades and runs nothing") {
  if (!can_run()) return;
  const auto launch = os::launch_for_session();
  auto plan = plan_for(launch, "print must not run");
  plan.probe_only = true;
  const auto outcome = host::run_session(plan, {});
  const auto& result = outcome.result;
  INFO("failure: " << (result.failure ? result.failure->message : "none") << "; problems: " << joined(result.problems));
  REQUIRE(outcome.mechanisms);
  CHECK_FALSE(outcome.program_started);
  CHECK(result.stdout_data.empty());
  CHECK(result.guarantees.identity == enforcement::unavailable);
  CHECK(result.guarantees.file_size == enforcement::unavailable);  // Windows has no per-process cap
  if (job_holds_limits(outcome)) {
    CHECK_FALSE(result.failure);
    CHECK(result.isolation == isolation_level::process);
  } else {
    // A probe below the floor says so as a run would be refused, from the grade.
    REQUIRE(result.failure);
    CHECK(result.failure->kind == failure_kind::isolation_unavailable);
    CHECK(result.failure->message.find("isolation=process") != std::string::npos);
    CHECK_FALSE(result.isolation);
  }
}
