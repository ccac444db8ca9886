#pragma once
// fork, set the child up, exec the interpreter with the bootstrap. The
// launcher learns whether the exec happened from a pipe whose write end is
// O_CLOEXEC: EOF with nothing written means the exec succeeded; a record
// means a named step failed, and nothing of the program ever ran.
#include <chrono>
#include <string>
#include <string_view>

#include <sys/types.h>

#include "environment.hpp"
#include "failure.hpp"
#include "identity.hpp"
#include "landlock.hpp"
#include "psych/protocol/frames.hpp"
#include "rlimits.hpp"
#include "seccomp.hpp"

namespace psych::launcher {

/// Everything the child needs, prepared before the fork so the child only makes system calls.
struct child_plan {
  std::string interpreter;
  string_vector argv;
  string_vector environment;
  std::string workspace;
  rlimit_plan rlimits;
  identity_plan identity;
  seccomp_filter filter;
  int bootstrap_fd = -1;  ///< the sealed memfd (bootstrap_fd.hpp), the child's fd 4
  /// PROCESS: the ruleset spawn() applies (an empty one where the kernel has no Landlock).
  /// ISOLATED's init prepares its own inside the new root, so there it stays null.
  const landlock_ruleset* landlock = nullptr;
};

/// `<interpreter> -I -S -c <loader> <token> <canary> <ipv4_port> <ipv6_port> <workspace>`:
/// isolated mode (no user site, no PYTHON* variables, no script directory on sys.path) and no
/// `site`, so nothing outside the interpreter's own library runs before the bootstrap. The loader
/// loads the bootstrap itself from fd 4.
string_vector bootstrap_argv(const protocol::launch_frame& launch, std::string_view loader);

struct spawned {
  pid_t pid = 0;
  std::chrono::steady_clock::time_point at{};  ///< the fork: the wall clock starts here
};

/// Forks and sets the child up: setsid, the channel on fd 3, the bootstrap on fd 4 and nothing
/// else past exec, rlimits, the identity drop, PR_SET_PDEATHSIG, chdir to the workspace,
/// NoNewPrivs, Landlock, seccomp (last), exec. In the launcher: detaches its own fds, then returns once the
/// exec succeeded. A failure is the child's own setup error, after the child has been reaped.
setup_result<spawned> spawn(const child_plan& plan);

}  // namespace psych::launcher
