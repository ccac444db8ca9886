#include "spawn.hpp"

#include <cerrno>
#include <csignal>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec_status.hpp"
#include "fds.hpp"
#include "signals.hpp"

namespace psych::launcher {

string_vector bootstrap_argv(const protocol::launch_frame& launch, std::string_view loader) {
  std::vector<std::string> argv{launch.interpreter, "-I", "-S", "-c", std::string(loader), launch.token,
                                 launch.canary, std::to_string(launch.probe.ipv4_port),
                                 std::to_string(launch.probe.ipv6_port), launch.workspace};
  // A prepared child loads what its claim's narrowing needs while it waits (bootstrap.py, main()).
  if (launch.prepared) argv.emplace_back("prepared");
  return string_vector(std::move(argv));
}

namespace {

// Runs in the child between fork and exec. The launcher is single-threaded, so the child may
// allocate; only the failure paths do (to format their message).
setup_result<void> set_up_child(const child_plan& plan, pid_t launcher) {
  PSYCH_TRY(restore_default_signals());
  // Its own session and process group: no controlling terminal, and one group the host can
  // signal as a whole.
  if (::setsid() < 0) return fail(system_failure("session", "setsid", errno));
  PSYCH_TRY(arrange_child_fds(plan.bootstrap_fd));
  PSYCH_TRY(apply_rlimits(plan.rlimits));
  // What the program makes in the host's shared directories (/tmp, /dev/shm) is its own: a
  // neighbour of another uid cannot read it, whatever the program's umask would have been.
  ::umask(077);
  PSYCH_TRY(become(plan.identity));
  // After the identity drop, because changing the euid clears the parent-death signal.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
    return fail(system_failure("session", "prctl", errno, "PR_SET_PDEATHSIG, SIGKILL"));
  // The launcher may have died before the line above: then nobody would ever kill this child.
  if (::getppid() != launcher) return fail(refusal("session", "the launcher ended during setup"));
  // After the drop, so entering the workspace is checked as the child's own uid.
  if (::chdir(plan.workspace.c_str()) != 0)
    return fail(system_failure("workspace", "chdir", errno, plan.workspace));
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return fail(system_failure("no_new_privs", "prctl", errno, "PR_SET_NO_NEW_PRIVS, 1"));
  // Needs NoNewPrivs (an unprivileged restrict_self is refused without it); after the chdir, so
  // the workspace is entered before anything is restricted.
  if (plan.landlock != nullptr) {
    PSYCH_TRY(plan.landlock->restrict_self());
  }
  PSYCH_TRY(install_filter(plan.filter));
  ::execve(plan.interpreter.c_str(), plan.argv.data(), plan.environment.data());
  return fail(system_failure("exec", "execve", errno, plan.interpreter));
}

[[noreturn]] void run_child(const child_plan& plan, pid_t launcher, int status_fd) {
  report_setup_failure(status_fd, set_up_child(plan, launcher).error());
}

}  // namespace

setup_result<spawned> spawn(const child_plan& plan) {
  int status[2];
  if (::pipe2(status, O_CLOEXEC) != 0) return fail(system_failure("exec", "pipe2", errno, "O_CLOEXEC"));
  const pid_t launcher = ::getpid();
  const auto at = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int saved = errno;
    ::close(status[0]);
    ::close(status[1]);
    return fail(system_failure("exec", "fork", saved));
  }
  if (pid == 0) {
    ::close(status[0]);
    run_child(plan, launcher, status[1]);
  }
  ::close(status[1]);
  auto detached = detach_launcher_fds();
  auto report = read_setup_status(status[0]);
  ::close(status[0]);
  if (detached && report && !report.value()) return spawned{pid, at};

  // Something failed: nothing of the program ran. Make sure the child is gone and reaped.
  ::kill(pid, SIGKILL);
  int ignored = 0;
  while (::waitpid(pid, &ignored, 0) < 0 && errno == EINTR) {
  }
  if (!detached) return fail(detached.error());
  if (!report) return fail(report.error());
  return fail(*report.value());
}

}  // namespace psych::launcher
