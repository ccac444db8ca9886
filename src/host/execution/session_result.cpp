#include "execution/session_result.hpp"

#ifndef _WIN32
#include <unistd.h>  // getuid, readlink
#endif

#include <chrono>
#include <map>
#include <string>

#include <fmt/format.h>

#include "psych/failure_decision.hpp"
#include "execution/artifact_walk.hpp"
#include "execution/session_clock.hpp"
#include "os/signal_name.hpp"

namespace psych::host {

namespace {

/// The number a POSIX launcher reports for SIGKILL in its exit frame (the same on every POSIX system
/// psych runs on). A Windows launcher reports no signals.
constexpr long long sigkill_number = 9;

/// The program's own report, as the failure decision reads it.
program_report report_of(const protocol::done_frame& done) {
  program_report report{.ok = done.ok, .value = done.value};
  if (done.error) {
    const auto& e = *done.error;
    const auto kind = e.kind == protocol::program_error_kind::syntax_error ? failure_kind::syntax_error
                      : e.kind == protocol::program_error_kind::value_not_serializable
                          ? failure_kind::value_not_serializable
                          : failure_kind::exception;
    report.error = program_failure{.kind = kind,
                                   .type = e.type,
                                   .message = e.message,
                                   .traceback = e.traceback,
                                   .line = e.line,
                                   .limit_hint = parse_enum<limit_name>(e.limit_hint)};
  }
  return report;
}

/// The launcher's exit report, as the failure decision reads it: the signal by name, and
/// whether it was the launcher's kill on the host's request rather than one of the interpreter's own.
interpreter_exit exit_of(const protocol::exit_frame& exit) {
  return {.exit_code = exit.exit_code,
          .signal = exit.signal ? std::optional(signal_name(*exit.signal)) : std::nullopt,
          .limit_hit = exit.limit_hit,
          .killed_on_request = exit.cancelled && exit.signal == sigkill_number};
}

/// This process's namespace ids, as the child reports its own: "mnt" -> "mnt:[4026531841]".
std::map<std::string, std::string> own_namespace_ids() {
  std::map<std::string, std::string> ids;
#ifndef _WIN32  // Windows has no namespaces to compare the child's with (Linux's /proc only, in fact)
  for (const char* kind : {"mnt", "pid", "net", "user", "ipc", "uts", "cgroup"}) {
    char target[128];
    const auto path = fmt::format("/proc/self/ns/{}", kind);
    const ssize_t n = ::readlink(path.c_str(), target, sizeof target);
    if (n > 0) ids.emplace(kind, std::string(target, static_cast<std::size_t>(n)));
  }
#endif
  return ids;
}

/// What happened, for the failure decision.
execution_facts facts_of(const session_state& s) {
  execution_facts f;
  f.launch_failure = s.launch_failure;
  f.isolation_failure = s.isolation_failure;
  f.violation = s.violation;
  f.probe_only = s.plan->probe_only;
  f.cancelled = s.cancelled;
  f.backstop_fired = s.backstop_fired;
  f.wall_seconds = s.plan->terms.limits.wall_seconds.value;
  if (s.done) f.done = report_of(*s.done);
  f.channel_closed = s.channel_closed;
  if (s.exit_report) f.exit = exit_of(*s.exit_report);
  f.reported_containment = s.grade.has_value();
  f.memory_bytes = s.plan->terms.limits.address_space_bytes.value;
  return f;
}

/// The workspace's artifacts into `result`; a problem collecting them goes into `problems`.
void collect_into(sandbox_result& result, std::vector<std::string>& problems, const std::string& workspace,
                  const artifact_policy& policy) {
  auto harvested = collect_artifacts(workspace, policy);
  if (!harvested) {
    problems.push_back("artifacts: " + harvested.error().message());
    return;
  }
  for (auto& file : harvested.value().files) {
    const auto size = file.bytes.size();
    result.artifacts.push_back({.path = std::move(file.path), .size_bytes = size, .data = std::move(file.bytes)});
  }
  result.artifacts_omitted = harvested.value().omitted_total();
  for (const auto& [reason, count] : harvested.value().omitted)
    result.artifacts_omitted_by_reason[reason] = count;
}

}  // namespace

grading_expectation expectation_of(const session_state& s) {
  const auto& plan = *s.plan;
  grading_expectation e;
  e.requested = plan.terms.isolation;
  e.limits = plan.terms.limits;
  e.network = plan.terms.network;
  if (plan.run_as) e.run_as_uid = plan.run_as->uid, e.run_as_gid = plan.run_as->gid;
#ifdef _WIN32
  e.worker_uid = -1;  // Windows has no uids: its launcher runs the child as the worker's own account
#else
  e.worker_uid = ::getuid();
#endif
  // As the launch named them: a starter may name the execution's directories otherwise.
  e.environment_keys = s.launched_environment_keys;
  e.host_namespace_ids = own_namespace_ids();
  return e;
}

finished_session finish_session(session_state& s, const binding_gateway* gateway) {
  finished_session finished;
  auto& r = s.outcome.result;
  if (s.grade) {
    note_loopback_exposure(*s.grade, s.plan->terms.network, s.probe.connections());
    if (s.exit_report) grade_exit(*s.grade, s.exit_report->survivors);
    r.isolation = s.grade->achieved;
    r.guarantees = s.grade->grades;
    r.network_denied = s.grade->network_denied;
    r.problems.insert(r.problems.begin(), s.grade->problems.begin(), s.grade->problems.end());
  }
  if (s.launcher_status != 0 && !s.exit_report && s.launcher_problem.empty())
    s.launcher_problem = fmt::format("the launcher exited with status {}", s.launcher_status);
  if (!s.launcher_problem.empty()) r.problems.push_back(s.launcher_problem);
  r.cancelled = s.cancelled;
  // The tree is gone: the proxy's connections end with it, and its meters are the execution's.
  if (auto egress = s.egress.finish()) r.egress = std::move(*egress);
  if (gateway) finished.tail = tail_of_calls(*gateway);
  // The whole execution, interpreter start included: the span the wall clock limits.
  r.duration_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - s.started_at).count();
  // The clock is graded by what happened, too: an execution that outlived its
  // wall clock and both graces was not held to it.
  const double held_to = s.plan->terms.limits.wall_seconds.value +
                         std::chrono::duration<double>(backstop_grace + kill_grace + drain_grace).count();
  if (r.duration_seconds > held_to) {
    r.guarantees.wall_clock = enforcement::unavailable;
    finished.tail.problems.push_back(fmt::format("wall_clock: the execution took {:.1f} s against a limit of {} s",
                                                 r.duration_seconds, s.plan->terms.limits.wall_seconds.value));
  }

  r.stdout_size = s.out.produced();
  r.stderr_size = s.err.produced();
  r.stdout_data = s.out.take();
  r.stderr_data = s.err.take();

  auto decided = decide_failure(facts_of(s));
  r.failure = std::move(decided.failure);
  r.limit_hit = decided.limit_hit;
  r.value = std::move(decided.value);
  finished.outcome = std::move(s.outcome);
  return finished;
}

session_outcome complete_result(const session_plan& plan, const execution_dirs& dirs, finished_session finished) {
  auto& outcome = finished.outcome;
  // The tree is gone: nothing races the walk but what the kernel already holds.
  if (outcome.program_started && plan.terms.artifacts.collection == artifact_collection::collect)
    collect_into(outcome.result, finished.tail.problems, dirs.workspace, plan.terms.artifacts);
  finish_result(outcome.result, std::move(finished.tail),
                {.output = plan.terms.output,
                 .blobs = plan.blobs,
                 .tenant = plan.tenant,
                 .account = {plan.bindings.budget, plan.bindings.run}});
  return std::move(outcome);
}

void sweep_after(const session_plan& plan, const execution_dirs& dirs, session_outcome& outcome) {
  if (!remove_execution_dirs(dirs))
    outcome.result.problems.push_back(
        fmt::format("workspace: the host could not remove everything under {}", dirs.base));
  // ISOLATED: the program saw no shared temp directory of the host (its /tmp is its own tmpfs,
  // its message queues its own ipc namespace's), so there is nothing of it to sweep.
  if (plan.run_as && plan.attempt != isolation_level::isolated) sweep_shared_temp(plan.run_as->uid);
}

}  // namespace psych::host
