#pragma once
// Signals in the launcher and in the child. The launcher takes SIGCHLD (and
// the termination signals a host or an operator may send it) through a
// signalfd, so the wait loop is one poll() with no handler and no race
// between "is the child gone" and "go to sleep".
#include "failure.hpp"

namespace psych::launcher {

/// Blocks SIGCHLD, SIGTERM, SIGINT and SIGHUP, ignores SIGPIPE (a host that vanished is an
/// EPIPE on control, not the launcher's death), and returns a signalfd for the blocked four.
/// Called before the fork, so no SIGCHLD can be missed.
setup_result<int> open_signal_fd();

/// What draining the signalfd saw.
struct signals_seen {
  bool child = false;        ///< SIGCHLD: some child changed state
  bool termination = false;  ///< SIGTERM/SIGINT/SIGHUP: end the execution now
};

/// Reads every pending signal off the (non-blocking) signalfd.
signals_seen drain_signal_fd(int fd);

/// In the child: every disposition back to its default and nothing blocked, since both survive
/// exec and the interpreter must not start with the launcher's SIGCHLD blocked or SIGPIPE ignored.
setup_result<void> restore_default_signals();

}  // namespace psych::launcher
