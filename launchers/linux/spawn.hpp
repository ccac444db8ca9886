#pragma once
// The PROCESS level's child on Linux: the shared first steps (child_start.hpp), then the parent-
// death signal, NoNewPrivs, Landlock and the seccomp filter, then the exec.
#include "child_start.hpp"
#include "identity.hpp"
#include "landlock.hpp"
#include "seccomp.hpp"

namespace psych::launcher {

/// What the child gets on Linux.
struct child_plan {
  child_basics basics;  ///< the bootstrap is a sealed memfd (bootstrap_fd.hpp)
  seccomp_filter filter;
  /// PROCESS: the ruleset spawn() applies (an empty one where the kernel has no Landlock).
  /// ISOLATED's init prepares its own inside the new root, so there it stays null.
  const landlock_ruleset* landlock = nullptr;
};

/// Forks and sets the child up: setsid, the channel on fd 3, the bootstrap on fd 4 and nothing
/// else past exec, rlimits, the identity drop, PR_SET_PDEATHSIG, chdir to the workspace,
/// NoNewPrivs, Landlock, seccomp (last), exec. In the launcher: detaches its own fds, then returns once the
/// exec succeeded. A failure is the child's own setup error, after the child has been reaped.
setup_result<spawned> spawn(const child_plan& plan);

}  // namespace psych::launcher
