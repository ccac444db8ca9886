#pragma once
// For a host that does not answer a program's calls itself: `psych serve` runs programs for a
// client whose tools never move to the service, so it relays each `call` to that client, whose own
// gateway admits, meters, journals and runs it, and relays the client's answer back. Without a
// relay (every local use) the host's gateway answers (bindings.hpp).
#include <cstdint>
#include <functional>

#include "psych/protocol/frames.hpp"

namespace psych {

class call_relay {
 public:
  virtual ~call_relay() = default;
  /// Where answers go: callable from any thread, any number of times, also after end() (it then
  /// drops them). Called once, before the program is sent.
  using answer_sink = std::function<void(const protocol::result_frame&)>;
  virtual void begin(answer_sink answer) = 0;
  /// A `call` frame of the program, as it arrived (not admitted by anything on this host).
  virtual void call(const protocol::call_frame& call) = 0;
  /// The program gave up on a call (`cancel_call`); its answer still comes.
  virtual void cancel_call(std::int64_t id) = 0;
  /// The program is done, or the execution ended: no call of it will be answered any more.
  virtual void end() = 0;
};

}  // namespace psych
