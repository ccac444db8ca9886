#include "task_count.hpp"

#include <array>
#include <cerrno>
#include <charconv>
#include <optional>
#include <string_view>
#include <vector>

#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/posix/retry.hpp"
#include "proc.hpp"

namespace psych::launcher {
namespace {

// Only /proc/<pid>/status shows a process's real uid, and status is the expensive file to read
// (the kernel formats memory and signal state for it): reading it for every process on the
// machine costs ~4 us each, and a machine has hundreds, most of them kernel threads.
//
// The owner of /proc/<pid> is no filter: it is the *effective* uid (and the files in it are root's
// whenever the process is not dumpable), while RLIMIT_NPROC counts by the real uid. A setuid
// program the uid started shows the program's owner, and would be missed.
//
// What the kernel does compare with the real uid, in one cheap call, is permission to signal:
// kill(pid, 0) from a sender without capabilities succeeds only when the target's real or saved
// uid equals the sender's real or effective uid (kill_ok_by_cred). A helper with effective uid
// `uid` therefore sorts every process into "certainly not the uid's" (EPERM) and "maybe", and
// only the maybes get their status read. Its real and saved uid are an id nothing runs as, not
// `uid`: the uid's own processes must not be able to signal (SIGSTOP) the helper, which the
// launcher waits for.
constexpr uid_t nobody_at_all = static_cast<uid_t>(-2);

struct probe {
  const std::vector<pid_t>* pids = nullptr;
  std::vector<char>* maybe = nullptr;
  uid_t uid = 0;
  bool dropped = false;
};

// Runs in a CLONE_VM | CLONE_VFORK child: the launcher's memory, its own stack and credentials,
// the launcher suspended until it exits. Raw system calls only (glibc's setresuid would try to
// change the launcher's threads; errno is the launcher's, which is asleep).
int sort_processes(void* argument) {
  auto& p = *static_cast<probe*>(argument);
  if (::syscall(SYS_setresuid, nobody_at_all, p.uid, nobody_at_all) != 0) return 1;
  p.dropped = true;
  for (std::size_t i = 0; i < p.pids->size(); ++i) {
    const long rc = ::syscall(SYS_kill, (*p.pids)[i], 0);
    // EPERM is the credential check saying no; ESRCH, that the process is gone. Anything else
    // (an LSM's EACCES) proves nothing about the uid, so that process is read.
    (*p.maybe)[i] = rc == 0 || (errno != EPERM && errno != ESRCH);
  }
  return 0;
}

/// For each pid, whether it may belong to `uid`; nullopt when the helper could not tell (then
/// every process is read: slower, never wrong).
std::optional<std::vector<char>> sort_by_signal_permission(const std::vector<pid_t>& pids, uid_t uid) {
  std::vector<char> maybe(pids.size(), 1);
  probe p{.pids = &pids, .maybe = &maybe, .uid = uid};
  alignas(16) std::array<char, 32 * 1024> stack;
  // The helper's euid change marks the shared memory map non-dumpable; the launcher gets its own
  // dumpability back afterwards (prctl can only set 0 or 1).
  const int dumpable = ::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
  // Exit signal 0: no SIGCHLD reaches the launcher's signalfd for a helper it reaps right here.
  const pid_t helper = ::clone(sort_processes, stack.data() + stack.size(), CLONE_VM | CLONE_VFORK, &p);
  if (helper < 0) return std::nullopt;
  int status = 0;
  (void)posix::retry_on_eintr([&] { return ::waitpid(helper, &status, __WALL); });
  if (dumpable == 1) ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  if (!p.dropped || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return maybe;
}

}  // namespace

setup_result<std::int64_t> count_tasks_of(uid_t uid) {
  PSYCH_TRY(auto pids, list_processes());
  const auto maybe = sort_by_signal_permission(pids, uid);
  std::int64_t tasks = 0;
  char buffer[4096];
  for (std::size_t i = 0; i < pids.size(); ++i) {
    if (maybe && !(*maybe)[i]) continue;
    const auto status = read_proc_file(pids[i], "status", buffer, sizeof buffer);
    if (!status) continue;  // it ended while we looked
    // "Uid:\t<real>\t<effective>..." and "Threads:\t<n>"; RLIMIT_NPROC counts by real uid.
    const auto field = [&](std::string_view key) -> std::int64_t {
      const auto at = status->find(key);
      if (at == std::string_view::npos) return -1;
      std::string_view value = status->substr(at + key.size());
      while (!value.empty() && (value.front() == '\t' || value.front() == ' ')) value.remove_prefix(1);
      std::int64_t number = -1;
      std::from_chars(value.data(), value.data() + value.size(), number);
      return number;
    };
    if (field("\nUid:") != static_cast<std::int64_t>(uid)) continue;
    if (const auto threads = field("\nThreads:"); threads > 0) tasks += threads;
  }
  return tasks;
}

}  // namespace psych::launcher
