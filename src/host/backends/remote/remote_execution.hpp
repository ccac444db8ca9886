#pragma once
// One execution on the service, start to finish (docs/remote-protocol.md). One run() is one event
// loop on the calling thread, like a local session: the execution's stream, the posts that carry
// the program's call results back, the clock and cancellation. The calls themselves go through
// this host's gateway and dispatcher exactly as a local program's do.
#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <stop_token>
#include <string>
#include <variant>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "bindings/binding_gateway.hpp"
#include "bindings/call_dispatcher.hpp"
#include "execution/live_output_relay.hpp"
#include "http/http_link.hpp"
#include "psych/host/remote_protocol.hpp"
#include "psych/host/sandbox.hpp"

namespace psych::host {

/// What a refusal of the service's becomes in a result: as a local backend reports the same.
failure_kind refusal_failure(const std::optional<refusal_reason>& reason);

class remote_backend;

/// One execution on the service, start to finish.
class remote_execution {
 public:
  remote_execution(remote_backend& backend, const run_request& request, execution_terms terms, std::string token);
  sandbox_result run(std::stop_token stop);

 private:
  enum class ending { none, provider_error, timeout, cancelled };

  awaitable<void> main();
  awaitable<void> stream_frames(http_link& link);
  awaitable<void> post_answers();
  awaitable<void> post_cancel();
  using stream_frame = std::variant<remote::accepted_frame, protocol::call_frame, protocol::cancel_call_frame,
                                    remote::output_frame, remote::done_frame, remote::error_frame,
                                    remote::live_output_frame>;
  /// One frame of the stream, in its place in the sequence; false when the stream is given up.
  bool take_frame(stream_frame& frame);
  /// `seconds` from now, or the deadline if that comes first.
  std::chrono::steady_clock::time_point within_deadline(double seconds) const;
  void fail(std::string why);
  void begin_cancel(ending why);
  result<void> take_output(const remote::output_frame& frame);
  result<void> take_live_output(const remote::live_output_frame& frame);
  /// The caller's sink gets its last chunks: in version 1 (a service that does not stream) the
  /// captured output, now; in either, what it missed of the streams' tails.
  void finish_live_output();
  sandbox_result assemble();

  remote_backend& backend_;
  const run_request& request_;
  execution_terms terms_;
  std::string token_;
  std::string id_;
  asio::io_context io_;
  gateway_setup setup_;  ///< the Run's execution id minted here when the request has none
  binding_gateway gateway_;
  call_dispatcher calls_;
  asio::steady_timer clock_, answers_ready_, cancel_grace_;
  /// After a results post answered 404: how long the stream has to bring the `done` that explains it.
  asio::steady_timer gone_grace_;
  std::deque<protocol::result_frame> answers_;
  bool answers_closed_ = false;
  http_link* stream_link_ = nullptr;
  /// The caller's sink behind its window; version 2 is asked for when there is one.
  std::optional<live_output_relay> live_;
  bool live_frames_ = false;     ///< this stream is version 2
  bool version_refused_ = false;  ///< the service refused version 2 before anything ran: ask in 1
  std::array<std::uint64_t, 2> live_end_{};  ///< per stream, where the last live_output frame ended

  ending ending_ = ending::none;
  std::string why_;
  bool accepted_ = false, cancel_requested_ = false, cancel_posted_ = false;
  bool execution_gone_ = false;  ///< the service answered a results post 404
  std::optional<remote::execution_outcome> outcome_;
  std::optional<remote::error_frame> refused_;
  std::string stdout_, stderr_;
  std::map<std::uint64_t, std::string> artifact_bytes_;
  std::uint64_t artifact_total_ = 0;
  std::vector<std::string> problems_;
  std::chrono::steady_clock::time_point started_;
  /// started_ + wall clock + slack + cancel grace: nothing of the execution outlives it.
  std::chrono::steady_clock::time_point deadline_;
};

}  // namespace psych::host
