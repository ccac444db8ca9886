#pragma once
// Ending the program's process tree: reap what has ended, then stop and kill every descendant
// round after round until the launcher has no children left, and say what survived. How the
// descendants are found, and how one process is signalled without hitting a recycled pid, is the
// OS's (linux/tree.hpp: /proc and pidfds under a child subreaper; macos/tree.hpp: the kernel's
// process table by parent chain, process group and the execution's own uid).
#include <chrono>
#include <cstdint>
#include <vector>

#include <sys/resource.h>
#include <sys/types.h>

#include "signals.hpp"

namespace psych::launcher {

/// What wait4() said about the interpreter.
struct child_exit {
  bool reaped = false;
  int status = 0;
  rusage usage{};
  std::chrono::steady_clock::time_point at{};
};

/// Reaps, without blocking, every child that has ended (the interpreter and adopted orphans),
/// so no zombie keeps counting against the uid's RLIMIT_NPROC. Records the interpreter's status
/// when it is among them. Returns false once the launcher has no children left at all.
bool reap_ended(pid_t interpreter, child_exit& exit);

/// One process as a scan saw it: with its start time, it names one process for good.
struct process_seen {
  pid_t pid = 0;
  unsigned long long start_time = 0;
  bool dead = false;  ///< a zombie: only reaping is left
};

/// The OS's half of the sweep.
class descendant_finder {
 public:
  virtual ~descendant_finder() = default;
  /// Orphans are re-parented to the launcher (a child subreaper): once it has no children there
  /// are no descendants, and no scan is needed to know it.
  [[nodiscard]] virtual bool adopts_orphans() const = 0;
  /// Every process of the program's tree now, dead ones included.
  virtual std::vector<process_seen> descendants() = 0;
  /// Sends `signal` to exactly the process `target` names, never to one that took its pid since
  /// the scan. False: it is gone (or was not signalled).
  virtual bool signal_exactly(const process_seen& target, int signal) = 0;
  /// SIGKILLs every process of the program's uid at once, where that uid is the execution's alone
  /// (linux/owner_kill.hpp): what a scan cannot catch (a chain that forks faster than /proc is
  /// read) this does. False where it cannot (no such uid, or the kill failed).
  virtual bool kill_by_owner() { return false; }
};

struct sweep_result {
  std::int64_t killed = 0;     ///< descendants other than the interpreter that were SIGKILLed
  std::int64_t survivors = 0;  ///< descendants still present when the sweep gave up (must be 0)
};

/// SIGKILLs every descendant (the interpreter too, if it still runs) round after round until
/// none is left, reaping each; between rounds it sleeps on `wake` (SIGCHLD), for at most
/// `patience` in all. Once something is found left (a child to reap, or a round's survivors), the
/// finder's kill_by_owner() is tried first, once. `killed` counts what the rounds signalled by pid,
/// not what the owner's kill ended.
sweep_result kill_tree(pid_t interpreter, child_exit& exit, const signal_source& wake, descendant_finder& finder,
                       std::chrono::milliseconds patience = std::chrono::seconds(5));

}  // namespace psych::launcher
