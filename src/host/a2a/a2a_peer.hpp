#pragma once
// One A2A peer: its agent card, read through the egress client and kept, and a call of one of its
// skills as one task, followed to its end within the call's deadline (docs/a2a.md, "A call").
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "a2a/agent_card.hpp"
#include "http/egress.hpp"
#include "psych/host/a2a.hpp"
#include "psych/host/bindings.hpp"

namespace psych::host {

class a2a_peer {
 public:
  /// invalid_argument for a URL the egress client refuses. Nothing is sent.
  static result<std::unique_ptr<a2a_peer>> create(a2a_peer_config config);

  [[nodiscard]] const std::string& name() const noexcept { return config_.name; }

  /// The card and where its JSON-RPC requests go (a target at the peer's origin).
  struct known_card {
    agent_card card;
    std::string rpc_target;
  };
  /// The card, read now when it is not held yet (within start_timeout). The detail of a failure
  /// says why, in words that quote no credential.
  result<known_card> card();

  /// Runs `skill` with `arguments_json` (one JSON object) as one task: the outcome of the call,
  /// within the configured timeout. Never throws.
  tool_outcome call(std::string_view skill, std::string_view arguments_json, std::stop_token stop);

 private:
  a2a_peer(a2a_peer_config config, std::unique_ptr<egress_client> client);

  struct exchange_context;  // one call's deadline, stop token and the tokens it sent, in a2a_peer.cpp
  tool_outcome run_call(exchange_context& context, std::string_view skill, std::string_view arguments_json);
  /// SendStreamingMessage, its events read as they arrive until the task ends; a stream that
  /// breaks or ends early leaves the task to follow().
  tool_outcome stream_call(exchange_context& context, std::string_view what, std::string_view skill,
                           std::string_view arguments_json);
  /// The answer to SendMessage: a Message, a Task that ended, or a Task to follow.
  tool_outcome after_send(exchange_context& context, std::string_view what, std::string_view body, std::int64_t id);
  /// CancelTask, then the outcome `kind`, saying why and whether the peer accepted the cancel.
  tool_outcome abandon(exchange_context& context, const std::string& task_id, tool_error_kind kind, std::string_view why);
  /// Follows the task to a state that ends the call, polling GetTask with a growing pause.
  tool_outcome follow(exchange_context& context, const std::string& task_id);
  /// CancelTask, best effort, with a deadline of its own: whether the peer accepted it.
  bool cancel(exchange_context& context, const std::string& task_id);
  /// A JSON-RPC POST of `body`, with the credential resolved now.
  egress_result<egress_request> request_for(exchange_context& context, std::string body, std::string_view accept);
  /// One JSON-RPC POST: the egress outcome, the body bounded by max_result_bytes.
  egress_result<egress_response> post(exchange_context& context, std::string body,
                                      std::chrono::steady_clock::time_point deadline, std::stop_token stop);

  a2a_peer_config config_;
  std::unique_ptr<egress_client> client_;
  std::mutex card_mutex_;  ///< held while the card is read, so it is read once at a time
  std::optional<known_card> card_;
};

}  // namespace psych::host
