#pragma once
// The process tree under the launcher. The launcher is a child subreaper, so
// every orphan of the program (a daemon that called setsid() and forked
// twice included) is re-parented to it rather than to init: "my descendants"
// is then exactly "the program's processes", and killing them never touches
// anything that is not ours.
#include <chrono>
#include <cstdint>

#include <sys/resource.h>
#include <sys/types.h>

#include "failure.hpp"

namespace psych::launcher {

/// PR_SET_CHILD_SUBREAPER on the launcher, before the fork.
setup_result<void> become_subreaper();

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

struct sweep_result {
  std::int64_t killed = 0;     ///< descendants other than the interpreter that were SIGKILLed
  std::int64_t survivors = 0;  ///< descendants still present when the sweep gave up (must be 0)
};

/// SIGKILLs every descendant (the interpreter too, if it still runs) round after round until
/// none is left, reaping each; between rounds it sleeps on `wake_fd` (the signalfd), for at most
/// `patience` in all. A process is signalled through a pidfd opened after re-checking its start
/// time, so a recycled pid is never killed in a descendant's place.
sweep_result kill_tree(pid_t interpreter, child_exit& exit, int wake_fd,
                       std::chrono::milliseconds patience = std::chrono::seconds(5));

}  // namespace psych::launcher
