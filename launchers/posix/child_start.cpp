#include "child_start.hpp"

#include <cerrno>
#include <csignal>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "exec_status.hpp"
#include "fds.hpp"
#include "platform/posix/retry.hpp"
#include "signals.hpp"

namespace psych::launcher {

string_vector bootstrap_argv(const protocol::launch_frame& launch, std::string_view loader) {
  std::vector<std::string> argv{launch.interpreter, "-I", "-S", "-c", std::string(loader), launch.token,
                                 launch.canary, std::to_string(launch.probe.ipv4_port),
                                 std::to_string(launch.probe.ipv6_port), launch.workspace};
  // A prepared child loads what its claim's narrowing needs while it waits (the bootstrap's main.py, main()).
  if (launch.prepared) argv.emplace_back("prepared");
  else if (launch.network == network_access::allowlist) argv.emplace_back(fmt::format("egress={}", launch.egress_proxy_port));
  return string_vector(std::move(argv));
}

// Runs in the child between fork and exec. The launcher is single-threaded, so the child may
// allocate; only the failure paths do (to format their message).
setup_result<void> enter_child_session(const child_basics& child) {
  PSYCH_TRY(restore_default_signals());
  // Its own session and process group: no controlling terminal, and one group the host can
  // signal as a whole.
  if (::setsid() < 0) return fail(system_failure(launch_stage::session, "setsid", errno));
  PSYCH_TRY(arrange_child_fds(child.bootstrap_fd));
  PSYCH_TRY(apply_rlimits(child.rlimits));
  // What the program makes in the host's shared directories (/tmp, /dev/shm) is its own: a
  // neighbour of another uid cannot read it, whatever the program's umask would have been.
  ::umask(077);
  return success();
}

setup_result<void> enter_workspace(const child_basics& child, pid_t launcher) {
  if (::getppid() != launcher) return fail(refusal(launch_stage::session, "the launcher ended during setup"));
  if (::chdir(child.workspace.c_str()) != 0) return fail(system_failure(launch_stage::workspace, "chdir", errno, child.workspace));
  return success();
}

setup_error exec_interpreter(const child_basics& child) {
  ::execve(child.interpreter.c_str(), child.argv.data(), child.environment.data());
  return system_failure(launch_stage::exec, "execve", errno, child.interpreter);
}

namespace {

/// pipe() then FD_CLOEXEC on both ends: the launcher is single-threaded, so no other thread can
/// fork between the two (and macOS has no pipe2).
setup_result<void> open_status_pipe(int (&ends)[2]) {
  if (::pipe(ends) != 0) return fail(system_failure(launch_stage::exec, "pipe", errno));
  for (const int fd : ends)
    if (::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
      const int saved = errno;
      ::close(ends[0]);
      ::close(ends[1]);
      return fail(system_failure(launch_stage::exec, "fcntl", saved, "status pipe, F_SETFD, FD_CLOEXEC"));
    }
  return success();
}

}  // namespace

setup_result<spawned> fork_and_exec(const child_setup& set_up) {
  int status[2];
  PSYCH_TRY(open_status_pipe(status));
  const pid_t launcher = ::getpid();
  const auto at = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int saved = errno;
    ::close(status[0]);
    ::close(status[1]);
    return fail(system_failure(launch_stage::exec, "fork", saved));
  }
  if (pid == 0) {
    ::close(status[0]);
    report_setup_failure(status[1], set_up(launcher));
  }
  ::close(status[1]);
  auto detached = detach_launcher_fds();
  auto report = read_setup_status(status[0]);
  ::close(status[0]);
  if (detached && report && !report.value()) return spawned{pid, at};

  // Something failed: nothing of the program ran. Make sure the child is gone and reaped.
  ::kill(pid, SIGKILL);
  int ignored = 0;
  (void)posix::retry_on_eintr([&] { return ::waitpid(pid, &ignored, 0); });
  if (!detached) return fail(detached.error());
  if (!report) return fail(report.error());
  return fail(*report.value());
}

}  // namespace psych::launcher
