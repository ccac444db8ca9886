#include "tree_sweep.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <set>
#include <utility>

#include <poll.h>
#include <sys/wait.h>

#include "platform/posix/retry.hpp"


namespace psych::launcher {

bool reap_ended(pid_t interpreter, child_exit& exit) {
#ifdef __WALL
  // Linux: an adopted orphan may have been cloned with an exit signal other than SIGCHLD.
  constexpr int options = WNOHANG | __WALL;
#else
  constexpr int options = WNOHANG;
#endif
  for (;;) {
    int status = 0;
    rusage usage{};
    const pid_t pid = posix::retry_on_eintr([&] { return ::wait4(-1, &status, options, &usage); });
    if (pid > 0) {
      if (pid == interpreter) exit = child_exit{true, status, usage, std::chrono::steady_clock::now()};
      continue;
    }
    return pid == 0;  // 0: children remain, none ended; -1 (ECHILD): no children at all
  }
}

sweep_result kill_tree(pid_t interpreter, child_exit& exit, const signal_source& wake, descendant_finder& finder,
                       std::chrono::milliseconds patience) {
  sweep_result sweep;
  std::set<std::pair<pid_t, unsigned long long>> signalled;
  const auto give_up = std::chrono::steady_clock::now() + patience;
  bool first_round = true, owner_tried = false;
  // Killed processes die and their orphans come to the launcher: wait for the SIGCHLD.
  const auto await_deaths = [&wake] {
    pollfd woken{wake.fd, POLLIN, 0};
    ::poll(&woken, 1, 10);
    wake.drain();
  };
  for (;;) {
    // Where orphans come back to the launcher, every descendant's parent chain passes through
    // one of its children, so no children at all means no descendants: the common case ends
    // here without a scan. Elsewhere only the scan can say the tree is gone.
    const bool children_left = reap_ended(interpreter, exit);
    if (!children_left && finder.adopts_orphans()) return sweep;
    // Something is left (a child, or, where orphans go elsewhere, a round that did not end it).
    // Where the uid is the execution's alone, one kill(-1) as it ends all of it at once, which no
    // fork outruns, before any scan of /proc (a scan can fall a generation behind a chain that
    // forks and exits, and takes longest exactly then); the rounds below only reap and check.
    if (!owner_tried && (children_left || !first_round)) {
      owner_tried = true;
      if (finder.kill_by_owner()) {
        first_round = false;
        await_deaths();
        continue;
      }
    }
    const auto descendants = finder.descendants();
    if (!children_left && descendants.empty()) return sweep;
    // Stop them all before killing any: a process killed first would otherwise wake its parent,
    // which could act on that death (write a file, fork) in the moment before its own SIGKILL.
    // SIGSTOP cannot be caught, blocked or ignored.
    for (const auto& process : descendants)
      if (!process.dead) finder.signal_exactly(process, SIGSTOP);
    for (const auto& process : descendants) {
      if (process.dead) continue;
      if (finder.signal_exactly(process, SIGKILL) && signalled.emplace(process.pid, process.start_time).second &&
          process.pid != interpreter)
        ++sweep.killed;
    }
    first_round = false;
    if (std::chrono::steady_clock::now() >= give_up) {
      // Something remains (a child to reap, or a process the finder still sees).
      sweep.survivors = std::max<std::int64_t>(static_cast<std::int64_t>(descendants.size()), 1);
      return sweep;
    }
    await_deaths();
  }
}

}  // namespace psych::launcher
