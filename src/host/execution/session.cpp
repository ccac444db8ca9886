#include "execution/session.hpp"

#include <array>
#include <chrono>
#include <optional>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>
#include <fmt/format.h>

#include "execution/execution_dirs.hpp"
#include "execution/live_output_relay.hpp"
#include "execution/session_clock.hpp"
#include "execution/session_conversation.hpp"
#include "execution/session_launch.hpp"
#include "execution/session_result.hpp"
#include "execution/session_state.hpp"
#include "os/random_hex.hpp"

namespace psych::host {

std::string random_token() { return random_hex(16); }

namespace {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using namespace asio::experimental::awaitable_operators;

/// One execution: its launch, its conversation over control and the channel, the program's
/// output, its clock, and its outcome (session_state.hpp says where each part lives). This is
/// what ties them together.
class session {
 public:
  session(const session_plan& plan, const execution_dirs& dirs)
      : state_(plan, dirs), clock_(state_), conversation_(state_, clock_) {}
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  /// The plan that ran: the one given, or a prepared session's claim.
  const session_plan& plan() const { return *state_.plan; }

  finished_session run(std::stop_token stop) {
    state_.started_at = std::chrono::steady_clock::now();
    if (auto launched = launch(state_); !launched) {
      state_.launch_failure = launched.error().message();
      return finish_session(state_, conversation_.gateway());
    }
    asio::co_spawn(state_.io, main(), asio::detached);
    // A prepared session is held to the ceiling's clock until it is ready, then to the claim's.
    asio::co_spawn(state_.io, clock_.watch(), asio::detached);
    std::stop_callback on_stop(stop, [this] { asio::post(state_.io, [this] { clock_.caller_cancelled(); }); });
    state_.io.run();
    finish_live_output();  // the clock is done: a slow sink holds up only the result
    if (handed_over_) return {.outcome = {.handed_over = true}, .tail = {}};
    return finish_session(state_, conversation_.gateway());
  }

 private:
  awaitable<void> main() {
    co_await (whole_result() && wait_launcher(state_, clock_));
    clock_.stop();
    state_.probe.close();
  }

  /// The conversation and the output to end of file; then a plan that takes its outcome early
  /// gets it now if the launcher reported the tree gone, with nothing of it left.
  awaitable<void> whole_result() {
    co_await (conversation_.converse() && drain(state_.stdout_pipe, state_.out, output_stream::stdout_stream) &&
              drain(state_.stderr_pipe, state_.err, output_stream::stderr_stream));
    if (!state_.hand_over || !state_.exit_report || state_.exit_report->survivors != 0) co_return;
    finish_live_output();  // the tree is gone: nothing is left for the clock to keep
    auto outcome = complete_result(*state_.plan, state_.dirs, finish_session(state_, conversation_.gateway()));
    handed_over_ = true;
    state_.hand_over(std::move(outcome));
  }

  awaitable<void> drain(pipe_stream& pipe, stream_capture& capture, output_stream which) {
    std::array<char, 64 * 1024> buffer{};
    for (;;) {
      boost::system::error_code ec;
      const auto n = co_await pipe.async_read_some(asio::buffer(buffer), asio::redirect_error(use_awaitable, ec));
      if (ec) co_return;
      const std::string_view bytes(buffer.data(), n);
      if (auto* relay = live_output()) relay->push(which, capture.produced(), bytes);
      capture.append(bytes);
    }
  }

  /// The plan's sink behind its window, made at the first output: a prepared session's plan is
  /// its claim's by then.
  live_output_relay* live_output() {
    if (!live_ && state_.plan->live_output) live_.emplace(*state_.plan->live_output);
    return live_ ? &*live_ : nullptr;
  }
  void finish_live_output() {
    if (live_) live_->finish(state_.out.produced(), state_.err.produced());
  }

  session_state state_;
  session_clock clock_;
  session_conversation conversation_;
  std::optional<live_output_relay> live_;
  bool handed_over_ = false;
};

}  // namespace

session_outcome run_session(const session_plan& plan, std::stop_token stop) {
  const auto handed = [&plan](session_outcome outcome) {
    if (!plan.hand_over) return outcome;
    plan.hand_over(std::move(outcome));
    return session_outcome{.handed_over = true};
  };
  auto dirs = make_execution_dirs(plan.temp_root);
  if (!dirs) {
    session_outcome outcome;
    outcome.result.failure = sandbox_failure{failure_kind::launch_failed, dirs.error().message()};
    if (plan.claim) plan.claim->ended(outcome.result.failure->message);
    return handed(std::move(outcome));
  }
  finished_session finished;
  // What the clean-up reads: a prepared session's claim's plan, until its outcome was handed over
  // (the claimant may have returned and taken its plan with it); then the prepared plan, which
  // launched the same identity into the same root.
  const session_plan* ran = &plan;
  try {
    session s(plan, dirs.value());
    finished = s.run(std::move(stop));
    if (!finished.outcome.handed_over) ran = &s.plan();
  } catch (const boost::system::system_error& error) {
    // Asio's event loop refuses to exist only when the process is out of descriptors or memory:
    // nothing was started, and that is this execution's failure, not the caller's exception.
    finished.outcome.result.failure =
        sandbox_failure{failure_kind::launch_failed, fmt::format("the event loop: {}", error.what())};
  }
  const auto& failure = finished.outcome.result.failure;
  if (plan.claim)
    plan.claim->ended(failure ? failure->message : std::string("the prepared sandbox ended before it was ready"));
  if (finished.outcome.handed_over) {  // the caller has its result: the sweep is this thread's alone
    sweep_after(*ran, dirs.value(), finished.outcome);
    return std::move(finished.outcome);
  }
  auto outcome = complete_result(*ran, dirs.value(), std::move(finished));
  sweep_after(*ran, dirs.value(), outcome);
  return handed(std::move(outcome));
}

}  // namespace psych::host
