#pragma once
// Signals in the launcher and in the child. The launcher takes SIGCHLD (and
// the termination signals a host or an operator may send it) through one
// descriptor, so the wait loop is one poll() with no race between "is the
// child gone" and "go to sleep": a signalfd on Linux (linux/signal_fd.cpp), a
// pipe its handlers write to on macOS (macos/signal_pipe.cpp).
#include "setup_error.hpp"

namespace psych::launcher {

/// What draining the descriptor saw.
struct signals_seen {
  bool child = false;        ///< SIGCHLD: some child changed state
  bool termination = false;  ///< SIGTERM/SIGINT/SIGHUP: end the execution now
};

/// The descriptor the launcher's signals arrive on, and how to read them off it.
struct signal_source {
  int fd = -1;  ///< polls readable once a signal arrived
  signals_seen (*drain_fd)(int fd) = nullptr;
  /// Reads every pending signal off the (non-blocking) descriptor.
  signals_seen drain() const { return drain_fd(fd); }
};

/// Routes SIGCHLD, SIGTERM, SIGINT and SIGHUP to one descriptor and ignores SIGPIPE (a host that
/// vanished is an EPIPE on control, not the launcher's death). Called before the fork, so no
/// SIGCHLD can be missed. Defined by each launcher (see above); only its main() calls it.
setup_result<signal_source> open_signal_source();

/// In the child: every disposition back to its default and nothing blocked, since both survive
/// exec and the interpreter must not start with the launcher's SIGCHLD blocked or SIGPIPE ignored.
setup_result<void> restore_default_signals();

}  // namespace psych::launcher
