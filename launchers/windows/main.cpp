// psych-launch-windows: runs one program's interpreter at isolation=process on Windows
// (docs/windows-launcher.md).
//
// The host starts it with PSYCH_HOST_PORT and PSYCH_HOST_SECRET in its environment and the
// program's stdout and stderr as its own; it connects to the host's loopback listener for control
// and for the channel (docs/contract.md, "Channels on Windows"), reads one `launch` frame, starts
// the child in a Job Object and answers `started` (or `error`, and nothing ran), supervises, ends
// and verifies the tree, and answers `exit`.
//
// Exit status: 0 after `exit` was written; 2 for a request it refused; 1 when setup failed or the
// host went away.
#include <string>
#include <variant>

#include "channel.hpp"
#include "psych_bootstrap.hpp"
#include "platform/windows/environment_block.hpp"
#include "setup_error.hpp"
#include "handles.hpp"
#include "job.hpp"
#include "spawn.hpp"
#include "supervise.hpp"
#include "validate.hpp"

namespace psych::windows {
namespace {

constexpr int exit_reported = 0;
constexpr int exit_setup_failed = 1;
constexpr int exit_refused = 2;

setup_result<protocol::launch_frame> accept_launch(control_channel& control) {
  PSYCH_TRY(auto line, control.read_line());
  if (!line) return fail(refusal(launch_stage::protocol, "control closed before a launch frame arrived"));
  auto frame = protocol::decode_frame<protocol::launch_frame, protocol::cancel_frame>(
      *line, {.max_bytes = control_frame_bytes});
  if (!frame) return fail(from_error(launch_stage::protocol, frame.error()));
  if (!std::holds_alternative<protocol::launch_frame>(frame.value()))
    return fail(refusal(launch_stage::protocol, "the first frame on control must be launch"));
  auto launch = std::get<protocol::launch_frame>(std::move(frame).value());
  PSYCH_TRY(validate_launch(launch));
  return launch;
}

// The loader travels on the command line, which Windows caps at 32,767 characters in all.
static_assert(launcher::bootstrap_loader.size() < 16384, "the Windows loader must leave room for the paths");

/// What the child is started with: the program's side of docs/contract.md, "Channels on Windows".
/// The interpreter runs isolated (-I: no user site, no PYTHON* variables, no script directory on
/// sys.path), without site (-S) and in UTF-8 mode (-X utf8: its pipes and open()'s default are
/// UTF-8, as C.UTF-8 makes them on POSIX; Windows would otherwise take the ANSI code page, which
/// cannot spell most of what a program prints and fails its print), and loads the bootstrap from
/// the handover pipe (-c).
std::vector<std::string> child_arguments(const protocol::launch_frame& launch, HANDLE handover) {
  return {"-I",
          "-S",
          "-X",
          "utf8",
          "-c",
          std::string(launcher::bootstrap_loader),
          launch.token,
          std::to_string(reinterpret_cast<std::uintptr_t>(handover)),
          launch.canary,
          std::to_string(launch.probe.ipv4_port),
          std::to_string(launch.probe.ipv6_port),
          launch.workspace};
}

/// Every field is what the job read back and what the child got: nothing is reported as asked.
protocol::started_frame started_for(const started_child& child, const execution_job& job) {
  const auto& read_back = job.read_back();
  return protocol::started_frame{.pid = child.pid,
                                 .mechanisms = mechanism_report{.fds_closed = true,
                                                                .environment_built = true,
                                                                .rlimits = read_back.per_process,
                                                                .job = read_back.job}};
}

int report_failure(control_channel& control, const setup_error& error, int status) {
  (void)control.write(error);
  return status;
}

int run() {
  WSADATA winsock{};
  if (::WSAStartup(MAKEWORD(2, 2), &winsock) != 0) return exit_setup_failed;
  auto host = host_address_from_environment();
  if (!host) return exit_refused;  // nowhere to report it: the host's address is what is missing
  auto control_socket = attach_to_host(host.value(), protocol::attached_stream::control);
  if (!control_socket) return exit_setup_failed;
  control_channel control(std::move(control_socket).value());

  auto launch = accept_launch(control);
  if (!launch) return report_failure(control, launch.error(), exit_refused);
  auto environment = build_environment_block(launch.value().environment);
  if (!environment) return report_failure(control, refusal(launch_stage::environment, environment.error().detail), exit_refused);

  // A step that fails after the child exists leaves it in the job, whose handle closes as this
  // returns: kill-on-close ends it.
  auto started = [&]() -> setup_result<std::pair<started_child, execution_job>> {
    PSYCH_TRY(auto channel, attach_to_host(host.value(), protocol::attached_stream::channel));
    PSYCH_TRY(auto job, execution_job::create(launch.value().limits));
    PSYCH_TRY(auto handles, prepare_inherited_handles(sizeof(WSAPROTOCOL_INFOW) + launcher::bootstrap_blob.size()));
    const child_plan plan{.executable = launch.value().interpreter,
                          .arguments = child_arguments(launch.value(), handles.inherited.handover.get()),
                          .environment_block = std::move(environment).value(),
                          .workspace = launch.value().workspace};
    PSYCH_TRY(auto child, spawn_in_job(plan, handles.inherited, job));
    // The child holds its own copies now. The launcher's read end of the handover pipe goes first:
    // should the child die before it has read everything, writing then fails instead of blocking.
    handles.inherited = {};
    PSYCH_TRY(hand_channel_over(channel.get(), child.pid, std::move(handles.handover_writer), launcher::bootstrap_blob));
    // The launcher's channel closes as this returns, its own stdout and stderr here.
    release_standard_output();
    return std::pair{std::move(child), std::move(job)};
  }();
  if (!started) return report_failure(control, started.error(), exit_setup_failed);
  const auto& [child, job] = started.value();
  if (!control.write(started_for(child, job))) return exit_setup_failed;

  auto outcome = supervise(control, child, job, launch.value().limits.wall_seconds.value);
  if (!outcome) {
    (void)job.kill_and_verify_empty(0);
    return report_failure(control, outcome.error(), exit_setup_failed);
  }
  if (outcome.value().host_gone) return exit_setup_failed;
  return control.write(outcome.value().exit) ? exit_reported : exit_setup_failed;
}

}  // namespace
}  // namespace psych::windows

int wmain() { return psych::windows::run(); }
