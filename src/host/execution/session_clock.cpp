#include "execution/session_clock.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace psych::host {

namespace {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;

}  // namespace

void session_state::send_cancel(protocol::cancel_reason reason) {
  if (cancel_sent || !control.is_open()) return;
  cancel_sent = true;
  control_out.send(protocol::cancel_frame{reason});
}

void session_state::note_violation(std::string what) {
  if (!violation) violation = std::move(what);
  send_cancel(protocol::cancel_reason::cancelled);
}

session_clock::session_clock(session_state& state)
    : state_(state), backstop_(state.io), drain_deadline_(state.io), exit_report_wait_(state.io),
      claim_wait_(state.io) {}

awaitable<void> session_clock::watch() {
  const auto wall = std::chrono::duration<double>(state_.plan->terms.limits.wall_seconds.value);
  backstop_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(wall) + backstop_grace);
  boost::system::error_code ec;
  co_await backstop_.async_wait(asio::redirect_error(use_awaitable, ec));
  if (ec) co_return;
  state_.backstop_fired = true;
  state_.send_cancel(protocol::cancel_reason::timeout);
  backstop_.expires_after(kill_grace);
  co_await backstop_.async_wait(asio::redirect_error(use_awaitable, ec));
  if (ec || state_.launcher_reaped) co_return;
  state_.kill_launcher();
  state_.launcher_problem = "the launcher did not end the execution at its wall clock and was killed";
}

void session_clock::caller_cancelled() {
  state_.cancelled = true;
  // A launcher that has not attached yet has been told nothing: it is ended instead.
  if (state_.loopback && !state_.control.is_open() && !state_.launcher_reaped) state_.kill_launcher();
  state_.send_cancel(protocol::cancel_reason::cancelled);
}

void session_clock::channel_ended() {
  state_.channel_closed = true;
  exit_report_wait_.expires_after(exit_report_grace);
  exit_report_wait_.async_wait([this](boost::system::error_code ec) {
    if (!ec) state_.send_cancel(protocol::cancel_reason::cancelled);
  });
}

void session_clock::exit_reported() { exit_report_wait_.cancel(); }

void session_clock::launcher_ended() {
  drain_deadline_.expires_after(drain_grace);
  asio::co_spawn(state_.io, close_streams_after_deadline(), asio::detached);
}

awaitable<void> session_clock::close_streams_after_deadline() {
  boost::system::error_code ec;
  co_await drain_deadline_.async_wait(asio::redirect_error(use_awaitable, ec));
  if (ec) co_return;  // everything ended on its own
  state_.stdout_pipe.close(ec);
  state_.stderr_pipe.close(ec);
  state_.channel.close(ec);
  state_.control.close(ec);
}

awaitable<void> session_clock::wait_for_claim(claim_point& claim) {
  backstop_.cancel();  // waiting is not running: the clock starts again with the claim
  claim_wait_.expires_after(claim.max_age());
  claim.ready([this] { asio::post(state_.io, [this] { claim_wait_.cancel(); }); });
  boost::system::error_code ec;
  co_await claim_wait_.async_wait(asio::redirect_error(use_awaitable, ec));
}

void session_clock::stop() {
  backstop_.cancel();
  drain_deadline_.cancel();
  exit_report_wait_.cancel();
  claim_wait_.cancel();
}

}  // namespace psych::host
