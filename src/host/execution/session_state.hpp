#pragma once
// What the parts of one session share: the plan, the event loop and the wires to the launcher
// (control, the channel, the output pipes), and the record of what happened, which the failure
// decision reads at the end. The parts act on it, each in its own file: the launch
// (session_launch), the frame exchange with the child (session_conversation), the clock and
// cancellation (session_clock), the result (session_result); session.cpp ties them together.
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>

#include "psych/capture.hpp"
#include "psych/core.hpp"
#include "psych/protocol/frames.hpp"
#include "execution/execution_dirs.hpp"
#include "execution/egress_session.hpp"
#include "execution/frame_transport.hpp"
#include "execution/launcher_process.hpp"
#include "execution/loopback_attach.hpp"
#include "execution/loopback_probe.hpp"
#include "execution/session.hpp"
#include "os/child_streams.hpp"

namespace psych::host {

/// Control and the channel: a Unix socket handed over as fd 3 or 4, or the loopback TCP connection
/// a launcher attached with (loopback_attach.hpp).
using session_socket = boost::asio::generic::stream_protocol::socket;

struct session_state {
  session_state(const session_plan& planned, const execution_dirs& directories);
  session_state(const session_state&) = delete;
  session_state& operator=(const session_state&) = delete;

  /// The contract's `cancel` on control, once: the launcher ends the tree and reports. Nothing is
  /// said before control exists or after it closed.
  void send_cancel(protocol::cancel_reason reason);
  /// The child broke the contract: the first breach is the one reported, and the tree is ended.
  void note_violation(std::string what);
  /// SIGKILL to the launcher, wherever it runs.
  void kill_launcher();

  // ---- the plan and the wires ----
  const session_plan* plan;  ///< a prepared session's becomes the claim's
  const std::function<void(session_outcome&&)> hand_over;  ///< the given plan's: the claim's caller
  claim_point* const claim;
  const execution_dirs& dirs;
  local_launcher own_launcher;  ///< used when the plan names no starter of its own
  launcher_starter& starter;
  boost::asio::io_context io;
  session_socket control, channel;
  pipe_stream stdout_pipe, stderr_pipe;
  exit_watch pidfd;
  frame_writer<session_socket> control_out, channel_out;
  loopback_probe probe;
  attach_listener listener;  ///< where a launcher that attaches over loopback connects
  const bool loopback;
  stream_capture out, err;
  std::map<std::string, std::string> environment;
  std::vector<std::string> launched_environment_keys;  ///< set by launch_frame()
  launcher_process launcher;
  std::string token;
  std::chrono::steady_clock::time_point started_at;  ///< the span the wall clock limits starts here
  egress_session egress;  ///< network=allowlist: the handover, then psych's egress proxy

  // ---- what happened ----
  session_outcome outcome;
  std::optional<containment_grade> grade;
  child_report hello_report;  ///< what the child observed; a prepared one's limits as lowered
  std::optional<protocol::done_frame> done;
  std::optional<protocol::exit_frame> exit_report;
  std::optional<std::string> violation;
  std::string launch_failure, isolation_failure, launcher_problem;
  int launcher_status = 0;
  bool cancelled = false, cancel_sent = false, backstop_fired = false, launcher_reaped = false;
  bool channel_closed = false;
};

}  // namespace psych::host
