#pragma once
// The steps every launcher's run() takes around its own start, each failure written to the host as
// the contract says (docs/contract.md, exit statuses): the request and the signals first, then,
// after the OS's start, `started` (or `error`), the supervision, and `exit`.
#include <optional>

#include "channel.hpp"
#include "child_start.hpp"
#include "psych/protocol/frames.hpp"
#include "request.hpp"
#include "signals.hpp"
#include "supervise.hpp"
#include "tree_sweep.hpp"

namespace psych::launcher {

inline constexpr int exit_reported = 0;      ///< `exit` was written
inline constexpr int exit_setup_failed = 1;  ///< setup failed (`error` names the call), or the host went away
inline constexpr int exit_refused = 2;       ///< a request it refused

/// A running interpreter and the `started` frame that describes it.
struct launched {
  spawned child;
  protocol::started_frame started;
};

/// An accepted request, with the launcher's signals routed to one descriptor (signals.hpp).
struct accepted_launch {
  accepted_request request;
  signal_source signals;
};

/// How a launcher routes its signals: its own open_signal_source() (signals.hpp).
using signal_opener = setup_result<signal_source> (*)();

/// accept_request(), then `open_signals`. On failure the `error` is written and `exit_status` set.
setup_result<accepted_launch> accept_launch(control_channel& control, isolation_level reachable,
                                            signal_opener open_signals, int& exit_status,
                                            bool network_of_its_own = false);

/// A start that failed: proves nothing is left of it (the spawn reaped its child), writes the
/// `error`, and returns the exit status.
int report_failed_start(control_channel& control, const setup_error& error, const signal_source& signals,
                        descendant_finder& tree);

/// Writes `started`. A host that is gone cannot take it: the tree is killed and false returned.
bool report_started(control_channel& control, const launched& started, const signal_source& signals,
                    descendant_finder& tree);

/// Writes `exit` unless the host is gone; the exit status.
int report_exit(control_channel& control, const supervision& outcome);

}  // namespace psych::launcher
