#pragma once
// One execution as the sandbox service holds it, from its request to its `done`: who asked, where
// it stands in admission (admission.hpp), how to stop it, the relay of its program's calls, and the
// NDJSON lines waiting for its client (execution_stream.hpp). The event loop alone touches it, but
// for the relay (any thread) and the worker's result, which is posted to the event loop.
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "psych/host/call_relay.hpp"
#include "psych/host/sandbox.hpp"
#include "service/live_output_frames.hpp"

namespace psych::host {

/// Relays one program's calls to its client and the client's answers back, each answer delivered
/// at most once and only for a call that is waiting for one.
class service_relay final : public call_relay {
 public:
  /// `send`: puts an NDJSON line in the client's stream; called from the program's thread.
  explicit service_relay(std::function<void(std::string)> send) : send_(std::move(send)) {}

  void begin(answer_sink answer) override;
  void call(const protocol::call_frame& call) override;
  void cancel_call(std::int64_t id) override;
  void end() override;
  /// Whether the answer was for a call that waited for one.
  bool deliver(const protocol::result_frame& answer);

 private:
  std::function<void(std::string)> send_;
  std::mutex mutex_;
  answer_sink answer_;
  std::set<std::int64_t> waiting_;
  bool ended_ = false;
};

/// An NDJSON line for the client; `live_bytes`: the program output a live_output frame carries,
/// which counts against its window until the line is written or dropped.
struct outbox_line {
  std::string text;
  std::uint64_t live_bytes = 0;
};

struct service_execution {
  explicit service_execution(boost::asio::io_context& io) : wake(io) {}
  std::string id, client, tenant;
  enum class phase { queued, granted, finished } state = phase::queued;
  bool cancel_requested = false;
  bool client_gone = false;
  /// Released as soon as the backend's run() returned: sending the outcome holds no sandbox, and a
  /// client that has its `done` must find the slot free already.
  bool slot_released = false;
  std::stop_source stop;
  std::unique_ptr<service_relay> relay;
  std::deque<outbox_line> outbox;  ///< NDJSON lines for the client, in order
  std::unique_ptr<live_output_frames> live;  ///< a version-2 client's live output; none in version 1
  /// Cancelled to wake whoever waits on the execution: a slot granted, a line in the outbox, the
  /// result, a cancel.
  boost::asio::steady_timer wake;
  std::thread worker;
  std::optional<sandbox_result> result;
  std::chrono::steady_clock::time_point granted_at;  ///< when it took its slot and started
};

}  // namespace psych::host
