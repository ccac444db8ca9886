// psych-launch-linux: runs one program's interpreter at isolation=process.
//
// The host hands it fds 0-4 (docs/contract.md, "Channels") and one `launch`
// frame on control. It answers `started` once the interpreter is exec'd (or
// `error`, and nothing ran), supervises the child until it ends, kills and
// reaps whatever the program left behind, and answers `exit`.
//
// Exit status: 0 after `exit` was written; 2 for a request it refused (bad
// frame, bad values, an identity it will not run as); 1 when setup failed or
// the host went away.
#include <variant>

#include "bootstrap_fd.hpp"
#include "channel.hpp"
#include "environment.hpp"
#include "failure.hpp"
#include "fds.hpp"
#include "identity.hpp"
#include "psych_bootstrap.hpp"
#include "rlimits.hpp"
#include "seccomp.hpp"
#include "signals.hpp"
#include "spawn.hpp"
#include "supervise.hpp"
#include "task_count.hpp"
#include "tree.hpp"
#include "validate.hpp"

namespace psych::launcher {
namespace {

constexpr int exit_reported = 0;
constexpr int exit_setup_failed = 1;
constexpr int exit_refused = 2;

/// The request, checked and turned into what the child will get. Nothing is created yet.
struct accepted_request {
  protocol::launch_frame launch;
  identity_plan identity;
  string_vector environment;
};

setup_result<accepted_request> accept_request(control_channel& control) {
  PSYCH_TRY(check_inherited_fds());
  PSYCH_TRY(auto line, control.read_line());
  if (!line) return fail(refusal("protocol", "control closed before a launch frame arrived"));
  auto frame = protocol::decode_frame<protocol::launch_frame, protocol::cancel_frame>(*line);
  if (!frame) return fail(from_error("protocol", frame.error()));
  if (!std::holds_alternative<protocol::launch_frame>(frame.value()))
    return fail(refusal("protocol", "the first frame on control must be launch"));
  auto launch = std::get<protocol::launch_frame>(std::move(frame).value());
  PSYCH_TRY(validate_launch(launch));
  PSYCH_TRY(auto identity, plan_identity(launch.run_as, launch.allow_same_uid));
  PSYCH_TRY(auto environment, build_environment(launch.environment));
  return accepted_request{std::move(launch), identity, std::move(environment)};
}

/// A running interpreter and the `started` frame that describes it.
struct launched {
  spawned child;
  protocol::started_frame started;
};

/// From an accepted request to a running interpreter: everything the launcher itself sets up,
/// then the fork.
setup_result<launched> start(accepted_request& request) {
  const auto& launch = request.launch;
  PSYCH_TRY(become_subreaper());
  PSYCH_TRY(auto base, count_tasks_of(request.identity.uid));
  PSYCH_TRY(hand_over(launch.workspace, request.identity));
  PSYCH_TRY(hand_over(launch.tmp_dir, request.identity));
  PSYCH_TRY(auto bootstrap, seal_bootstrap(bootstrap_blob));

  const child_plan plan{.interpreter = launch.interpreter,
                        .argv = bootstrap_argv(launch, bootstrap_loader),
                        .environment = std::move(request.environment),
                        .workspace = launch.workspace,
                        .rlimits = plan_rlimits(launch.limits, launch.open_files, base),
                        .identity = request.identity,
                        .filter = filter_for(launch.network),
                        .bootstrap_fd = bootstrap.get()};
  PSYCH_TRY(auto child, spawn(plan));

  // Every field is what the child got: spawn() returns only after each step succeeded.
  return launched{child, protocol::started_frame{
      .pid = child.pid,
      .mechanisms = mechanism_report{.session = true,
                                     .subreaper = true,
                                     .no_new_privs = true,
                                     .seccomp = seccomp_state::filter,
                                     .landlock_abi = 0,
                                     .namespaces = {},
                                     .cgroup = "none",
                                     .uid_drop = request.identity.drop,
                                     .fds_closed = true,
                                     .environment_built = true,
                                     .rlimits = report_rlimits(plan.rlimits),
                                     .process_count_base = base}}};
}

int run() {
  control_channel control{control_fd};
  auto request = accept_request(control);
  if (!request) {
    (void)control.write(request.error());
    return exit_refused;
  }
  auto signal_fd = open_signal_fd();
  if (!signal_fd) {
    (void)control.write(signal_fd.error());
    return exit_setup_failed;
  }
  auto started = start(request.value());
  if (!started) {
    child_exit none;
    kill_tree(0, none, signal_fd.value());  // spawn() reaped its child; this only proves nothing is left
    (void)control.write(started.error());
    return exit_setup_failed;
  }
  const spawned child = started.value().child;
  if (!control.write(started.value().started)) {  // the host is gone: end what was started for it
    child_exit ended;
    kill_tree(child.pid, ended, signal_fd.value());
    return exit_setup_failed;
  }
  const auto outcome = supervise(control, watch{.interpreter = child.pid,
                                                .started = child.at,
                                                .wall_seconds = request.value().launch.limits.wall_seconds.value,
                                                .cpu_seconds = request.value().launch.limits.cpu_seconds.value,
                                                .signal_fd = signal_fd.value()});
  if (outcome.host_gone) return exit_setup_failed;
  return control.write(outcome.exit) ? exit_reported : exit_setup_failed;
}

}  // namespace
}  // namespace psych::launcher

int main() { return psych::launcher::run(); }
