#include "bindings/call_dispatcher.hpp"

#include "bindings/completion_sink.hpp"

#include <optional>
#include <thread>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

namespace psych::host {

namespace asio = boost::asio;

call_dispatcher::call_dispatcher(asio::io_context& io, binding_gateway& gateway, std::string execution_id,
                                 answer_sink answer)
    : gateway_(gateway), execution_id_(std::move(execution_id)), answer_(std::move(answer)),
      sink_(std::make_shared<completion_sink>(io)), settled_(io) {}

call_dispatcher::~call_dispatcher() { sink_->close(); }

void call_dispatcher::dispatch(const protocol::call_frame& call) {
  if (in_flight_.contains(call.id)) {
    answer({.id = call.id, .ok = false, .value = std::nullopt,
            .error = protocol::call_error{.kind = tool_error_kind::malformed_call, .tool = call.tool,
                                          .message = "a call with this id is already in flight"}});
    return;
  }
  auto admission = gateway_.admit(call);
  if (auto* refused = std::get_if<protocol::result_frame>(&admission)) {
    answer(*refused);
    return;
  }
  in_flight_[call.id].call = std::get<admitted_call>(std::move(admission));
  admitted_.push_back(call.id);
  // Posted, so it runs once the frames read with this one are dispatched too: calls the program
  // gathered are admitted together and their started records made durable by one sync.
  if (admitted_.size() == 1) sink_->post([this] { proceed_admitted(); });
}

void call_dispatcher::proceed_admitted() {
  for (const auto id : std::exchange(admitted_, {})) {
    const auto found = in_flight_.find(id);
    if (found == in_flight_.end()) continue;
    if (found->second.given_up || over_) {  // never invoked: ended as cancelled, and logged so
      on_call_done(id, tool_outcome::error(tool_error_kind::cancelled, "the program gave up on this call"));
      continue;
    }
    auto proceeding = gateway_.proceed(found->second.call);
    if (auto* answered = std::get_if<protocol::result_frame>(&proceeding)) {
      answer(*answered);
      settle(found);
      continue;
    }
    invoke(id, found->second);
  }
}

void call_dispatcher::invoke(std::int64_t id, flight& slot) {
  *invoking_ = id;
  const tool_call asked{slot.call.call_id, execution_id_, slot.call.tool, slot.call.arguments_json};
  // A tool that answers at once, on this thread, is answered without a trip through the queue;
  // any other completion is posted here from wherever it came.
  const auto own_thread = std::this_thread::get_id();
  std::optional<tool_outcome> at_once;
  gateway_.invoker()->invoke(
      asked, slot.stop.get_token(),
      [sink = sink_, this, id, own_thread, at_once = &at_once, invoking = invoking_](tool_outcome outcome) {
        // Only this very call's completion, inside its own invoke(): an invoker that completes an
        // earlier call from within a later invoke() goes through the queue like any other.
        if (std::this_thread::get_id() == own_thread && *invoking == id) {
          *at_once = std::move(outcome);
          return;
        }
        sink->post([this, id, outcome = std::move(outcome)] { on_call_done(id, outcome); });
      });
  *invoking_ = not_invoking;
  if (at_once) on_call_done(id, *at_once);
}

void call_dispatcher::give_up(std::int64_t id) {
  if (const auto found = in_flight_.find(id); found != in_flight_.end()) {
    found->second.given_up = true;
    found->second.stop.request_stop();
  }
}

void call_dispatcher::on_call_done(std::int64_t id, const tool_outcome& outcome) {
  const auto found = in_flight_.find(id);
  if (found == in_flight_.end()) return;  // an invoker that called back twice
  const auto& slot = found->second;
  if (slot.given_up || over_) {
    gateway_.abandon(slot.call, outcome);
    answer({.id = id, .ok = false, .value = std::nullopt,
            .error = protocol::call_error{.kind = tool_error_kind::cancelled, .tool = slot.call.tool,
                                          .message = "the program gave up on this call"}});
  } else {
    answer(gateway_.complete(slot.call, outcome));
  }
  settle(found);
}

void call_dispatcher::settle(std::map<std::int64_t, flight>::iterator call) {
  in_flight_.erase(call);
  if (in_flight_.empty()) settled_.cancel();
}

void call_dispatcher::answer(const protocol::result_frame& frame) {
  if (!over_) answer_(frame);
}

asio::awaitable<std::vector<std::string>> call_dispatcher::end_calls() {
  over_ = true;
  std::vector<std::string> problems;
  if (!in_flight_.empty()) {
    for (auto& [id, slot] : in_flight_) slot.stop.request_stop();
    settled_.expires_after(stop_grace);
    boost::system::error_code ec;
    co_await settled_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    for (const auto& [id, slot] : in_flight_)
      problems.push_back(fmt::format(
          "bindings: {} ({}) did not end within {} s of being asked to stop; its outcome is unknown",
          slot.call.tool, slot.call.call_id, stop_grace.count()));
  }
  // The calls' finished records were not waited for; once the execution's result is out, what it
  // says was spent is durable too (a failure is the gateway's problem, reported with the result).
  gateway_.sync_journal();
  co_return problems;
}

}  // namespace psych::host
