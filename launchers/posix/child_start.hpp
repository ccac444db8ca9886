#pragma once
// Starting the interpreter, the part every POSIX launcher shares: fork, the first steps in the
// child, exec, and learning whether the exec happened. The launcher learns that from a pipe whose
// write end is close-on-exec: EOF with nothing written means the exec succeeded; a record means a
// named step failed, and nothing of the program ever ran (exec_status.hpp). Each OS adds its own
// steps between enter_child_session() and exec_interpreter() (linux/spawn.cpp, macos/spawn.cpp).
#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include <sys/types.h>

#include "environment.hpp"
#include "identity.hpp"
#include "setup_error.hpp"
#include "psych/protocol/frames.hpp"
#include "rlimits.hpp"

namespace psych::launcher {

/// `<interpreter> -I -S -c <loader> <token> <canary> <ipv4_port> <ipv6_port> <workspace>`:
/// isolated mode (no user site, no PYTHON* variables, no script directory on sys.path) and no
/// `site`, so nothing outside the interpreter's own library runs before the bootstrap. The loader
/// loads the bootstrap itself from fd 4.
string_vector bootstrap_argv(const protocol::launch_frame& launch, std::string_view loader);

/// What every launcher's child gets, prepared before the fork so the child only makes system calls.
struct child_basics {
  std::string interpreter;
  string_vector argv;
  string_vector environment;
  std::string workspace;
  rlimit_plan rlimits;
  identity_plan identity;
  int bootstrap_fd = -1;  ///< the bootstrap (bootstrap_fd.hpp), the child's fd 4
};

struct spawned {
  pid_t pid = 0;
  std::chrono::steady_clock::time_point at{};  ///< the fork: the wall clock starts here
};

/// In the child, first, each step fatal: default signal dispositions and an empty mask; its own
/// session and process group; the channel on fd 3, the bootstrap on fd 4 and nothing else past
/// exec; the rlimits (before the identity drop: raising a hard limit needs the launcher's
/// privilege); umask 077. The identity drop (identity.hpp) comes next, in the OS's own setup.
setup_result<void> enter_child_session(const child_basics& child);

/// In the child, after the identity drop: a launcher that already ended could never end this child,
/// so that is a failure; then the workspace becomes the working directory (after the drop, so
/// entering it is checked as the child's own uid).
setup_result<void> enter_workspace(const child_basics& child, pid_t launcher);

/// In the child, last: execve. Returns only when it failed, with the failure.
setup_error exec_interpreter(const child_basics& child);

/// The child's whole setup, from the fork to the exec; it is given the launcher's pid. It returns
/// only with the step that failed.
using child_setup = std::function<setup_error(pid_t launcher)>;

/// Forks and runs `set_up` in the child. In the launcher: detaches its own fds (fds.hpp), then
/// returns once the exec succeeded. A failure is the child's own setup error, after the child has
/// been reaped.
setup_result<spawned> fork_and_exec(const child_setup& set_up);

}  // namespace psych::launcher
