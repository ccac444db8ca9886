#pragma once
// A session's conversation: the frame exchange of the contract with the launcher and the child.
// The launcher's `started` (or its launch error), the child's `hello`, graded, and the answer:
// `run` or `abort` (a prepared session waits for its claim and is narrowed first); then the
// program's calls until its `done`, and the launcher's `exit` report.
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/awaitable.hpp>

#include "bindings/binding_gateway.hpp"
#include "bindings/call_dispatcher.hpp"
#include "bindings/completion_sink.hpp"
#include "execution/session_clock.hpp"
#include "execution/session_state.hpp"

namespace psych::host {

class session_conversation {
 public:
  /// An unprepared session takes its calls at once; a prepared one when it is claimed.
  session_conversation(session_state& state, session_clock& clock);
  ~session_conversation();
  session_conversation(const session_conversation&) = delete;
  session_conversation& operator=(const session_conversation&) = delete;

  /// The whole exchange, from the launcher's first frame to its exit report.
  boost::asio::awaitable<void> converse();
  /// What the program's calls went through; null before a prepared session is claimed.
  const binding_gateway* gateway() const { return gateway_ ? &*gateway_ : nullptr; }

 private:
  using frames = frame_reader<session_socket>;

  boost::asio::awaitable<bool> hello_and_decide(frames& control, frames& channel);
  std::optional<std::string> isolation_shortfall() const;
  bool isolation_reached();
  boost::asio::awaitable<bool> claimed();
  boost::asio::awaitable<bool> narrowed(frames& control, frames& channel);
  void take_calls();
  boost::asio::awaitable<void> program(frames& channel);
  boost::asio::awaitable<void> read_exit(frames& control);

  session_state& state_;
  session_clock& clock_;
  std::optional<binding_gateway> gateway_;  ///< made with the plan that runs (take_calls)
  std::optional<call_dispatcher> calls_;
  std::shared_ptr<completion_sink> relay_answers_;
  bool relay_ended_ = false;
};

}  // namespace psych::host
