#pragma once
// A program's calls between `run` and `done`: each `call` is admitted by the gateway as it
// arrives, the calls read together are made durable in the run log together and handed to the
// invoker, and each is answered when its tool finishes, so calls the program gathered run
// together while the host keeps reading. It knows nothing of launchers or
// sockets: answers go to whatever the owner gives it to write them to.
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "bindings/binding_gateway.hpp"
#include "psych/host/bindings.hpp"
#include "psych/protocol/frames.hpp"

namespace psych::host {

class completion_sink;

class call_dispatcher {
 public:
  /// Where answers go, in the order they are ready; called on the io_context's thread only.
  using answer_sink = std::function<void(const protocol::result_frame&)>;

  /// Calls run on `gateway`'s invoker as part of `execution_id`; completions from any thread
  /// are brought back to `io`'s thread.
  call_dispatcher(boost::asio::io_context& io, binding_gateway& gateway, std::string execution_id,
                  answer_sink answer);
  ~call_dispatcher();
  call_dispatcher(const call_dispatcher&) = delete;
  call_dispatcher& operator=(const call_dispatcher&) = delete;

  /// A `call` frame: answered at once (a refusal, a built-in) or when its tool finishes.
  void dispatch(const protocol::call_frame& call);
  /// A `cancel_call` frame: the tool is asked to stop, and its call is answered `cancelled`.
  void give_up(std::int64_t id);
  /// The execution is over for its calls: each one still in flight is asked to stop and gets a
  /// grace period to say how it ended, which the run log records. Nothing is answered any more.
  /// Returns a problem for each call that did not end within the grace.
  boost::asio::awaitable<std::vector<std::string>> end_calls();

  /// How long calls still in flight at the end get to finish after being asked to stop. A tool
  /// that ignores the request is left behind (its log record stays "started": UNKNOWN).
  static constexpr auto stop_grace = std::chrono::seconds(2);

 private:
  /// A call in flight: the invoker has it, and its stop source.
  struct flight {
    admitted_call call;
    std::stop_source stop;
    bool given_up = false;  ///< the program sent cancel_call
  };

  /// The calls admitted since the last time, in order: their started records made durable by one
  /// sync, then each answered at once or invoked.
  void proceed_admitted();
  void invoke(std::int64_t id, flight& slot);
  void on_call_done(std::int64_t id, const tool_outcome& outcome);
  void settle(std::map<std::int64_t, flight>::iterator call);
  void answer(const protocol::result_frame& frame);

  binding_gateway& gateway_;
  std::string execution_id_;
  answer_sink answer_;
  std::shared_ptr<completion_sink> sink_;
  boost::asio::steady_timer settled_;
  std::map<std::int64_t, flight> in_flight_;  ///< admitted, and not yet answered
  std::vector<std::int64_t> admitted_;         ///< in flight, waiting for proceed_admitted()
  /// The id of the call whose invoke() this thread is inside, if any: its completion is then at once.
  static constexpr std::int64_t not_invoking = std::numeric_limits<std::int64_t>::min();
  std::shared_ptr<std::int64_t> invoking_ = std::make_shared<std::int64_t>(not_invoking);
  bool over_ = false;
};

}  // namespace psych::host
