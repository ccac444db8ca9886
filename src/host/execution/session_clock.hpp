#pragma once
// A session's clock and its cancellation: the host's backstop to the launcher's own wall clock,
// the caller's cancel, the wait for an exit report once the channel ended, the drain after the
// launcher is gone, and the wait of a prepared session for its claim.
#include <chrono>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "execution/session_state.hpp"

namespace psych::host {

/// How long the host lets the launcher overrun the wall clock before it
/// cancels on its own, and then before it kills the launcher outright.
constexpr auto backstop_grace = std::chrono::seconds(2);
constexpr auto kill_grace = std::chrono::seconds(3);
/// How long output may keep flowing after the launcher is gone (it kills the
/// tree before it exits, so normally nothing is left holding a pipe).
constexpr auto drain_grace = std::chrono::seconds(2);
/// How long the host waits, once the channel ended before `done`, for the launcher's exit report
/// before it cancels. An interpreter that dies of a signal closes its channel a moment before it
/// is reaped: at ISOLATED by the sandbox's init, which reports how it died and only then exits.
/// A cancel in that moment would have init killed first, and the signal lost with its report.
/// A program that closed its channel and lives on is cancelled after this wait.
constexpr auto exit_report_grace = std::chrono::seconds(1);

class session_clock {
 public:
  explicit session_clock(session_state& state);

  /// The launcher holds the wall clock; this is the backstop for a launcher that does not. A
  /// prepared session is held to the ceiling's clock until it is ready, then to the claim's.
  boost::asio::awaitable<void> watch();
  /// The caller cancelled (posted to the event loop by the stop callback).
  void caller_cancelled();
  /// End of file on the channel before `done`: no result can arrive any more, so the tree is
  /// ended now rather than at the wall clock — once the launcher has had exit_report_grace to
  /// report an interpreter that is already dead, so that the report says how it died.
  void channel_ended();
  /// The launcher has said how it ended, or never will: nothing to cancel.
  void exit_reported();
  /// The launcher is reaped: whatever still holds a pipe or a socket now is not the launcher's
  /// tree any more (it killed that); stop waiting for it after drain_grace.
  void launcher_ended();
  /// A prepared session waits (at most the pool's maximum age) until it is claimed or retired;
  /// waiting is not running, so the backstop stops until the claim's clock starts.
  boost::asio::awaitable<void> wait_for_claim(claim_point& claim);
  /// The execution is over: every timer ends.
  void stop();

 private:
  boost::asio::awaitable<void> close_streams_after_deadline();

  session_state& state_;
  boost::asio::steady_timer backstop_, drain_deadline_, exit_report_wait_, claim_wait_;
};

}  // namespace psych::host
