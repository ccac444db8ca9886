#include "tree.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc.hpp"
#include "signals.hpp"

namespace psych::launcher {

setup_result<void> become_subreaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
    return fail(system_failure("tree", "prctl", errno, "PR_SET_CHILD_SUBREAPER, 1"));
  return success();
}

bool reap_ended(pid_t interpreter, child_exit& exit) {
  for (;;) {
    int status = 0;
    rusage usage{};
    // __WALL: an adopted orphan may have been cloned with an exit signal other than SIGCHLD.
    const pid_t pid = ::wait4(-1, &status, WNOHANG | __WALL, &usage);
    if (pid > 0) {
      if (pid == interpreter) exit = child_exit{true, status, usage, std::chrono::steady_clock::now()};
      continue;
    }
    if (pid < 0 && errno == EINTR) continue;
    return pid == 0;  // 0: children remain, none ended; -1 (ECHILD): no children at all
  }
}

namespace {

/// The processes whose parent chain reaches `ancestor`, as one /proc scan saw them.
std::vector<process_stat> descendants_of(pid_t ancestor) {
  std::vector<process_stat> found;
  auto pids = list_processes();
  if (!pids) return found;
  std::unordered_map<pid_t, process_stat> table;
  for (const pid_t pid : pids.value())
    if (auto stat = read_stat(pid)) table.emplace(pid, *stat);
  for (const auto& [pid, stat] : table) {
    pid_t parent = stat.ppid;
    // Bounded walk: a chain longer than the table would be a cycle from a racy scan. The
    // ancestor is compared before the walk stops at init, since it may be init itself: a
    // launcher that is a container's pid 1.
    for (std::size_t hops = 0; hops <= table.size() && parent > 0; ++hops) {
      if (parent == ancestor) {
        found.push_back(stat);
        break;
      }
      if (parent == 1) break;
      const auto up = table.find(parent);
      if (up == table.end()) break;
      parent = up->second.ppid;
    }
  }
  return found;
}

/// Sends `signal` to exactly the process `target` names: a pidfd pins the process, and the start
/// time read after opening it proves the pid was not recycled between the scan and the signal.
bool signal_exactly(const process_stat& target, int signal) {
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, target.pid, 0));
  if (pidfd < 0) return false;  // already gone
  bool sent = false;
  if (const auto now = read_stat(target.pid); now && now->start_time == target.start_time)
    sent = ::syscall(SYS_pidfd_send_signal, pidfd, signal, nullptr, 0) == 0;
  ::close(pidfd);
  return sent;
}

}  // namespace

sweep_result kill_tree(pid_t interpreter, child_exit& exit, int wake_fd,
                       std::chrono::milliseconds patience) {
  sweep_result sweep;
  std::set<std::pair<pid_t, unsigned long long>> signalled;
  const auto give_up = std::chrono::steady_clock::now() + patience;
  for (;;) {
    // Every descendant's parent chain passes through one of the launcher's children, so no
    // children at all means no descendants: the common case ends here without a /proc scan.
    if (!reap_ended(interpreter, exit)) return sweep;
    const auto descendants = descendants_of(::getpid());
    // Stop them all before killing any: a process killed first would otherwise wake its parent,
    // which could act on that death (write a file, fork) in the moment before its own SIGKILL.
    // SIGSTOP cannot be caught, blocked or ignored.
    for (const auto& process : descendants)
      if (process.state != 'Z' && process.state != 'X') signal_exactly(process, SIGSTOP);
    for (const auto& process : descendants) {
      if (process.state == 'Z' || process.state == 'X') continue;  // dead: only reaping is left
      if (signal_exactly(process, SIGKILL) && signalled.emplace(process.pid, process.start_time).second &&
          process.pid != interpreter)
        ++sweep.killed;
    }
    if (std::chrono::steady_clock::now() >= give_up) {
      // Children remain (reap_ended said so), even if a failed /proc scan saw none.
      sweep.survivors = std::max<std::int64_t>(static_cast<std::int64_t>(descendants.size()), 1);
      return sweep;
    }
    // Killed processes die and their orphans come to the launcher: wait for the SIGCHLD.
    pollfd wake{wake_fd, POLLIN, 0};
    ::poll(&wake, 1, 10);
    drain_signal_fd(wake_fd);
  }
}

}  // namespace psych::launcher
