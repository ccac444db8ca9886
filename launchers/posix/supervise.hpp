#pragma once
// The wait loop: from the exec until the tree is gone. The launcher watches
// three things at once with one poll(): the child's exit (SIGCHLD through
// the signalfd), the host (a `cancel` or EOF on control) and the wall clock,
// which it enforces itself because it is the one limit that always applies.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>

#include <sys/resource.h>
#include <sys/types.h>

#include "channel.hpp"
#include "signals.hpp"
#include "psych/protocol/frames.hpp"
#include "tree_sweep.hpp"

namespace psych::launcher {

/// What an intermediate process (ISOLATED's init) saw of the interpreter's end, just before it
/// exited itself.
struct init_report {
  int status = 0;              ///< the interpreter's wait status
  rusage usage{};              ///< the interpreter's own resource usage
  std::int64_t leftovers = 0;  ///< other processes still in the namespace at that moment
};

/// What a `narrow` frame does to the sandbox (main.cpp): checks the limits against the launch's,
/// writes the cgroup's and returns the rlimits the child is to lower its own to.
using narrower = std::function<setup_result<applied_rlimits>(const sandbox_limits&)>;

struct watch {
  pid_t interpreter = 0;
  std::chrono::steady_clock::time_point started{};  ///< the fork
  double wall_seconds = 0;
  double cpu_seconds = 0;  ///< as requested, to recognise a SIGKILL at the hard RLIMIT_CPU
  signal_source signals;
  /// Finds and signals the tree's processes (tree_sweep.hpp); the OS's.
  descendant_finder* tree = nullptr;
  /// ISOLATED: `interpreter` is the sandbox's init, and this reads init's report of the
  /// interpreter's own end (linux/isolated.hpp) once init was reaped. Empty at the PROCESS level.
  std::function<std::optional<init_report>()> init_reported;
  /// ISOLATED with cgroup CPU accounting: the whole tree's CPU time so far. The launcher ends the
  /// execution when it reaches cpu_seconds (RLIMIT_CPU binds each process alone). Empty: none.
  std::function<std::optional<double>()> tree_cpu_seconds;
  /// A prepared launch: no wall clock until one `narrow` frame arrives, which restarts it (and
  /// `started`) with the narrowed limits. Empty: not prepared, and `narrow` breaks the contract.
  narrower narrow;
};

struct supervision {
  protocol::exit_frame exit;
  bool host_gone = false;  ///< control reached EOF: there is nobody to send `exit` to
};

/// Waits for the interpreter to end (or ends it: wall clock, cancel, host gone, a termination
/// signal), then kills and reaps every remaining descendant and describes it all as `exit`.
supervision supervise(control_channel& control, const watch& what);

}  // namespace psych::launcher
