#include "execution/session_conversation.hpp"

#include <cstring>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <fmt/format.h>

#include "execution/session_launch.hpp"
#include "execution/session_result.hpp"

namespace psych::host {

namespace {

namespace asio = boost::asio;
using asio::awaitable;

}  // namespace

session_conversation::session_conversation(session_state& state, session_clock& clock)
    : state_(state), clock_(clock), relay_answers_(std::make_shared<completion_sink>(state.io)) {
  if (!state_.claim) take_calls();
}

session_conversation::~session_conversation() { relay_answers_->close(); }

// g++ 12 at -O2 reports Asio's awaitable_frame_base::operator delete as mismatched with the
// frame's allocation here when this file shares a unity source with others (remote_backend.cpp
// says the same): Asio allocates the frame with that class's own operator new, so the pair matches.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
awaitable<void> session_conversation::converse() {
  auto& s = state_;
  if (s.loopback && !co_await attach_then_launch(s)) co_return;
  frames control(s.control, {.max_frame_bytes = 1u << 20});
  frames channel(s.channel, {});

  auto first = co_await control.next<protocol::started_frame, protocol::launch_error_frame>();
  if (!first || !first.value()) {
    s.launch_failure = first ? "the launcher ended without reporting a start"
                             : "the launcher broke the contract: " + first.error().message();
    s.send_cancel(protocol::cancel_reason::cancelled);
    co_return;
  }
  if (auto* error = std::get_if<protocol::launch_error_frame>(&*first.value())) {
    s.launch_failure = fmt::format("{}: {}({}): {}", error->stage.spelling(), error->syscall,
                                   error->error_number ? std::strerror(static_cast<int>(error->error_number)) : "-",
                                   error->message);
    s.outcome.launch_error = *error;
    co_return;
  }
  s.outcome.mechanisms = std::get<protocol::started_frame>(*first.value()).mechanisms;
  s.starter.add_mechanisms(*s.outcome.mechanisms);
  // Before the child's hello, whose probe asks the proxy for a host no list names.
  if (auto served = s.egress.serve(s.plan->terms); !served) {
    s.launch_failure = "egress: " + served.error().message();
    s.send_cancel(protocol::cancel_reason::cancelled);
    co_await read_exit(control);
    co_return;
  }
  if (s.loopback && !co_await attach_channel(s)) {
    co_await read_exit(control);
    co_return;
  }

  if (co_await hello_and_decide(control, channel)) co_await program(channel);
  if (!s.exit_report) co_await read_exit(control);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/// Reads the child's containment report, grades it, and answers run or abort. True when the
/// program was sent.
awaitable<bool> session_conversation::hello_and_decide(frames& control, frames& channel) {
  auto& s = state_;
  auto hello = co_await channel.next<protocol::hello_frame>();
  if (!hello) {
    s.note_violation(hello.error().message());
    co_return false;
  }
  if (!hello.value()) {
    clock_.channel_ended();
    co_return false;
  }
  const auto& frame = std::get<protocol::hello_frame>(*hello.value());
  if (frame.token != s.token) {
    s.note_violation("frame_out_of_sequence: the hello frame does not carry this execution's token");
    co_return false;
  }
  s.hello_report = frame.report;
  s.grade = grade_containment(expectation_of(s), *s.outcome.mechanisms, s.hello_report);
  note_loopback_exposure(*s.grade, s.plan->terms.network, s.probe.connections());

  if (s.plan->probe_only) {
    // describe() runs nothing, but says when a program would be refused, and why: the grade, not
    // a guess that the child never reported.
    if (auto shortfall = isolation_shortfall()) s.isolation_failure = std::move(*shortfall);
    s.channel_out.send(protocol::abort_frame{"probe only: describe() never runs a program"});
    co_return false;
  }
  if (!isolation_reached()) co_return false;
  if (s.claim) {
    // Prepared: graded against the ceiling; now the wait, then the claim's own limits, observed
    // and graded again before anything of its program is sent.
    if (!co_await claimed()) co_return false;
    if (!co_await narrowed(control, channel)) co_return false;
    if (!isolation_reached()) co_return false;
  }
  s.outcome.program_started = true;
  s.egress.program_starts();
  if (s.plan->relay)
    s.plan->relay->begin([sink = relay_answers_, this](const protocol::result_frame& answer) {
      sink->post([this, answer] {
        if (!relay_ended_) state_.channel_out.send(answer);
      });
    });
  s.channel_out.send(protocol::run_frame{.program = s.plan->program,
                                         .filename = s.plan->filename,
                                         .bindings = gateway_->bindings_for_run(),
                                         .excluded = binding_gateway::excluded_for_run()});
  co_return true;
}

/// Why the grade does not reach the isolation the plan asks for; nullopt when it does.
std::optional<std::string> session_conversation::isolation_shortfall() const {
  const auto& s = state_;
  if (s.grade->reaches(s.plan->terms.isolation)) return std::nullopt;
  std::string why = fmt::format("requested isolation={}, the child's containment reached {}",
                                name_of(s.plan->terms.isolation),
                                s.grade->achieved ? name_of(*s.grade->achieved) : "less than process");
  for (const auto& problem : s.grade->problems) why.append("; ").append(problem);
  return why;
}

/// Whether the grade reaches the isolation the plan asks for; if not, the child is aborted.
bool session_conversation::isolation_reached() {
  auto shortfall = isolation_shortfall();
  if (!shortfall) return true;
  state_.isolation_failure = std::move(*shortfall);
  state_.channel_out.send(protocol::abort_frame{"isolation_unavailable: " + state_.isolation_failure});
  return false;
}

/// Waits (at most the pool's maximum age) for the request that claims this sandbox, and takes
/// its plan. False: retired or expired unclaimed, and the child is aborted.
awaitable<bool> session_conversation::claimed() {
  auto& s = state_;
  co_await clock_.wait_for_claim(*s.claim);
  const session_plan* request = s.claim->take();
  if (!request) {
    s.channel_out.send(protocol::abort_frame{"retired: the prepared sandbox was never claimed"});
    co_return false;
  }
  s.plan = request;
  s.out = stream_capture(request->terms.output.max_bytes);
  s.err = stream_capture(request->terms.output.max_bytes);
  take_calls();
  s.started_at = std::chrono::steady_clock::now();  // the span the wall clock limits starts with the claim
  asio::co_spawn(s.io, clock_.watch(), asio::detached);
  co_return true;
}

/// The claim's limits: the launcher narrows the cgroup and restarts its clock, the child lowers
/// its rlimits and reports what it then observes, and the grade is made again from that.
/// A sandbox that ended while it waited is `prepared_lost`: nothing of the program reached it.
awaitable<bool> session_conversation::narrowed(frames& control, frames& channel) {
  auto& s = state_;
  s.control_out.send(protocol::narrow_frame{s.plan->terms.limits});
  auto answer = co_await control.next<protocol::narrowed_frame, protocol::launch_error_frame, protocol::exit_frame>();
  if (!answer || !answer.value()) {
    s.launch_failure = answer ? "the prepared sandbox's launcher ended before it was narrowed"
                              : "the launcher broke the contract: " + answer.error().message();
    s.outcome.prepared_lost = answer.has_value();
    s.send_cancel(protocol::cancel_reason::cancelled);
    co_return false;
  }
  if (auto* error = std::get_if<protocol::launch_error_frame>(&*answer.value())) {
    s.launch_failure = fmt::format("narrowing the prepared sandbox: {}: {}", error->stage.spelling(), error->message);
    co_return false;
  }
  if (auto* exit = std::get_if<protocol::exit_frame>(&*answer.value())) {
    s.exit_report = *exit;
    s.launch_failure = "the prepared sandbox ended before it was claimed";
    s.outcome.prepared_lost = true;
    co_return false;
  }
  const auto& rlimits = std::get<protocol::narrowed_frame>(*answer.value()).rlimits;
  s.outcome.mechanisms->rlimits = rlimits;
  s.channel_out.send(protocol::lower_limits_frame{rlimits});
  auto lowered = co_await channel.next<protocol::lowered_frame>();
  if (!lowered) {
    s.note_violation(lowered.error().message());
    co_return false;
  }
  if (!lowered.value()) {
    s.launch_failure = "the prepared child ended instead of lowering its limits";
    s.outcome.prepared_lost = true;
    clock_.channel_ended();
    co_return false;
  }
  const auto& observed = std::get<protocol::lowered_frame>(*lowered.value());
  s.hello_report.rlimits = observed.rlimits;
  s.hello_report.cgroup_memory_limit = observed.cgroup_memory_limit;
  s.hello_report.cgroup_pids_limit = observed.cgroup_pids_limit;
  s.grade = grade_containment(expectation_of(s), *s.outcome.mechanisms, s.hello_report);
  note_loopback_exposure(*s.grade, s.plan->terms.network, s.probe.connections());
  co_return true;
}

/// The calls' gateway and dispatcher, for the plan that runs: at once, or when claimed.
void session_conversation::take_calls() {
  gateway_.emplace(state_.plan->bindings);
  calls_.emplace(state_.io, *gateway_, state_.plan->bindings.run.execution_id,
                 [this](const protocol::result_frame& answer) { state_.channel_out.send(answer); });
}

/// The program's frames until its `done`: calls go to the dispatcher as they arrive.
awaitable<void> session_conversation::program(frames& channel) {
  auto& s = state_;
  for (;;) {
    auto frame = co_await channel.next<protocol::done_frame, protocol::call_frame, protocol::cancel_call_frame>();
    if (!frame) {
      s.note_violation(frame.error().message());
      break;
    }
    if (!frame.value()) {
      clock_.channel_ended();
      break;
    }
    if (const auto* call = std::get_if<protocol::call_frame>(&*frame.value())) {
      if (s.plan->relay) s.plan->relay->call(*call);
      else calls_->dispatch(*call);
    } else if (const auto* cancel = std::get_if<protocol::cancel_call_frame>(&*frame.value())) {
      if (s.plan->relay) s.plan->relay->cancel_call(cancel->id);
      else calls_->give_up(cancel->id);
    } else {
      s.done = std::get<protocol::done_frame>(*frame.value());
      break;
    }
  }
  if (s.plan->relay) {
    // The client's gateway ends its own calls and records them; nothing here waits for them.
    relay_ended_ = true;
    s.plan->relay->end();
    co_return;
  }
  const auto problems = co_await calls_->end_calls();
  s.outcome.result.problems.insert(s.outcome.result.problems.end(), problems.begin(), problems.end());
}

awaitable<void> session_conversation::read_exit(frames& control) {
  auto& s = state_;
  auto frame = co_await control.next<protocol::exit_frame>();
  clock_.exit_reported();
  if (frame && frame.value()) s.exit_report = std::get<protocol::exit_frame>(*frame.value());
  else if (!frame) s.launcher_problem = "the launcher's exit report broke the contract: " + frame.error().message();
  else s.launcher_problem = "the launcher ended without an exit report";
}

}  // namespace psych::host
