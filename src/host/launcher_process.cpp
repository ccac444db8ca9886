#include "launcher_process.hpp"

#include "spawn_attributes.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>


namespace psych::host {
namespace {

/// The layout's targets are fds 0..4; a source already sitting there would be
/// clobbered by an earlier dup2, so sources are first moved above them.
int above_layout(int fd) { return fd >= 0 && fd < 5 ? ::fcntl(fd, F_DUPFD_CLOEXEC, 5) : fd; }

}  // namespace

result<launcher_process> spawn_launcher(const std::string& launcher_path, const launcher_fds& fds) {
  const int sources[] = {above_layout(fds.stdout_write), above_layout(fds.stderr_write), above_layout(fds.control),
                         above_layout(fds.channel)};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  for (int target = 1; target <= 4; ++target) posix_spawn_file_actions_adddup2(&actions, sources[target - 1], target);

  const own_group_attributes attributes;  // a terminal's ^C reaches the host, which cancels cleanly

  char* argv[] = {const_cast<char*>(launcher_path.c_str()), nullptr};
  char* empty_env[] = {nullptr};  // the launcher needs nothing from the host's environment
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, launcher_path.c_str(), &actions, attributes.get(), argv, empty_env);
  posix_spawn_file_actions_destroy(&actions);
  for (int i = 0; i < 4; ++i) {
    const int original[] = {fds.stdout_write, fds.stderr_write, fds.control, fds.channel};
    if (sources[i] != original[i]) ::close(sources[i]);
  }
  if (rc != 0)
    return failure(error_kind::launcher_unavailable,
                   fmt::format("posix_spawn({}): {}", launcher_path, std::strerror(rc)));

  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    const int saved = errno;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return failure(error_kind::system_call_failed, fmt::format("pidfd_open({}): {}", pid, std::strerror(saved)));
  }
  return launcher_process{pid, pidfd};
}

int reap_launcher(const launcher_process& process) {
  siginfo_t info{};
  if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(process.pidfd), &info, WEXITED) != 0) return -1;
  return info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
}

}  // namespace psych::host
