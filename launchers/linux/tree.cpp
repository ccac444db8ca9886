#include "tree.hpp"

#include <cerrno>
#include <unordered_map>

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "owner_kill.hpp"
#include "proc.hpp"

namespace psych::launcher {

setup_result<void> become_subreaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
    return fail(system_failure(launch_stage::tree, "prctl", errno, "PR_SET_CHILD_SUBREAPER, 1"));
  return success();
}

std::vector<process_seen> proc_descendants::descendants() {
  const pid_t ancestor = ::getpid();
  std::vector<process_seen> found;
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
        found.push_back({.pid = stat.pid, .start_time = stat.start_time, .dead = stat.state == 'Z' || stat.state == 'X'});
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

bool proc_descendants::signal_exactly(const process_seen& target, int signal) {
  // A pidfd pins the process, and the start time read after opening it proves the pid was not
  // recycled between the scan and the signal.
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, target.pid, 0));
  if (pidfd < 0) return false;  // already gone
  bool sent = false;
  if (const auto now = read_stat(target.pid); now && now->start_time == target.start_time)
    sent = ::syscall(SYS_pidfd_send_signal, pidfd, signal, nullptr, 0) == 0;
  ::close(pidfd);
  return sent;
}

bool proc_descendants::kill_by_owner() { return sole_owner_ && kill_every_process_of(*sole_owner_); }

}  // namespace psych::launcher
