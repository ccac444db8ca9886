// psych-launch-macos: runs one program's interpreter at isolation=process under a seatbelt profile.
//
// The host hands it fds 0-4 (docs/contract.md, "Channels") and one `launch` frame on control. It
// answers `started` once the interpreter is exec'd (or `error`, and nothing ran), supervises the
// child until it ends, kills and reaps whatever the program left behind, and answers `exit`.
// isolation=isolated is refused: macOS has no address-space limit CPython respects, and the
// profile is no boundary the child can prove (docs/macos-launcher.md).
//
// Exit status: 0 after `exit` was written; 2 for a request it refused; 1 when setup failed or the
// host went away.
#include <cstdint>
#include <optional>
#include <string_view>

#include <sys/resource.h>

#include <unistd.h>

#include "bootstrap_fd.hpp"
#include "channel.hpp"
#include "confinement.hpp"
#include "fds.hpp"
#include "identity.hpp"
#include "launch_steps.hpp"
#include "process_table.hpp"
#include "psych_bootstrap.hpp"
#include "request.hpp"
#include "rlimits.hpp"
#include "seatbelt_profile.hpp"
#include "signals.hpp"
#include "spawn.hpp"
#include "supervise.hpp"
#include "tree.hpp"
#include "validate.hpp"

namespace psych::launcher {
namespace {

/// Where the program's processes are looked for: its uid too when only this execution holds it.
tree_marks marks_for(const accepted_request& request, std::optional<pid_t> group) {
  const bool exclusive = request.identity.drop && request.launch.run_as && request.launch.run_as->exclusive;
  return {.launcher = ::getpid(),
          .group = group,
          .exclusive_uid = exclusive ? std::optional<uid_t>(request.identity.uid) : std::nullopt};
}

/// The rlimits as `started` and `narrowed` report them. macOS accepts RLIMIT_AS and enforces
/// nothing with it, so it is left alone and reported unset (-1): memory is graded unavailable
/// rather than promised, and the bootstrap leaves it alone when it lowers a prepared child's limits.
rlimit_plan without_address_space(rlimit_plan plan) {
  plan.address_space = RLIM_INFINITY;
  return plan;
}

applied_rlimits reported(const rlimit_plan& plan) {
  auto applied = report_rlimits(plan);
  applied.address_space_bytes = -1;
  return applied;
}

/// A prepared launch's narrowing (supervise.hpp): no cgroup here, only the rlimits the child
/// lowers its own to, planned as the launch planned them.
narrower narrowing_of(const protocol::launch_frame& launch, std::int64_t process_count_base) {
  if (!launch.prepared) return {};
  return [&launch, process_count_base](const sandbox_limits& limits) -> setup_result<applied_rlimits> {
    PSYCH_TRY(validate_narrowing(limits, launch.limits));
    return reported(without_address_space(plan_rlimits(limits, launch.open_files, process_count_base)));
  };
}

setup_result<launched> start(accepted_request& request) {
  const auto& launch = request.launch;
  PSYCH_TRY(auto base, count_processes_of(request.identity.uid));
  PSYCH_TRY(hand_over(launch.workspace, request.identity));
  PSYCH_TRY(hand_over(launch.tmp_dir, request.identity));
  PSYCH_TRY(auto bootstrap, seal_bootstrap(bootstrap_blob));
  PSYCH_TRY(auto terms, seatbelt_terms_for(launch));
  PSYCH_TRY(auto profile, seatbelt_profile(terms));
  const child_plan plan{
      .basics = {.interpreter = launch.interpreter,
                 .argv = bootstrap_argv(launch, bootstrap_loader),
                 .environment = std::move(request.environment),
                 .workspace = launch.workspace,
                 .rlimits = without_address_space(plan_rlimits(launch.limits, launch.open_files, base)),
                 .identity = request.identity,
                 .bootstrap_fd = bootstrap.get()},
      .profile = std::move(profile)};
  PSYCH_TRY(auto child, spawn(plan));

  // Every field is what the child got: spawn() returns only after each step succeeded.
  return launched{child, protocol::started_frame{
      .pid = child.pid,
      .mechanisms = mechanism_report{.session = true,
                                     .subreaper = false,
                                     .no_new_privs = false,
                                     .seccomp = seccomp_state::none,
                                     .landlock_abi = 0,
                                     .namespaces = {},
                                     .cgroup = "none",
                                     .uid_drop = request.identity.drop,
                                     .fds_closed = true,
                                     .environment_built = true,
                                     .rlimits = reported(plan.basics.rlimits),
                                     .process_count_base = base,
                                     .cpu_tree_limit = false,
                                     .seatbelt = true,
                                     .uid_sweep = marks_for(request, std::nullopt).exclusive_uid.has_value(),
                                     .address_space_limit = false}}};
}

int run() {
  control_channel control{control_fd};
  int status = exit_setup_failed;
  auto accepted = accept_launch(control, isolation_level::process, open_signal_source, status);
  if (!accepted) return status;
  auto& request = accepted.value().request;
  const auto& signals = accepted.value().signals;
  auto started = start(request);
  if (!started) {
    table_descendants nothing_started(marks_for(request, std::nullopt));
    return report_failed_start(control, started.error(), signals, nothing_started);
  }
  const spawned child = started.value().child;
  // The interpreter called setsid(): its pid is its process group's.
  table_descendants tree(marks_for(request, child.pid));
  if (!report_started(control, started.value(), signals, tree)) return exit_setup_failed;
  const auto& launch = request.launch;
  const auto outcome = supervise(control, watch{.interpreter = child.pid,
                                                .started = child.at,
                                                .wall_seconds = launch.limits.wall_seconds.value,
                                                .cpu_seconds = launch.limits.cpu_seconds.value,
                                                .signals = signals,
                                                .tree = &tree,
                                                .narrow = narrowing_of(launch, started.value().started.mechanisms
                                                                                   .process_count_base)});
  return report_exit(control, outcome);
}

}  // namespace
}  // namespace psych::launcher

int main(int argc, char**) {
  using namespace psych::launcher;
  if (argc != 1) {
    constexpr std::string_view usage = "usage: psych-launch-macos (no arguments; docs/contract.md)\n";
    (void)!::write(2, usage.data(), usage.size());
    return 2;
  }
  return run();
}
