#pragma once
// A2A peers as a binding source: each skill of each peer's agent card is the binding
// `peer__skill`, and a call of it is one A2A task (SendMessage, followed to a terminal state by its
// stream or with GetTask, CancelTask when the call is abandoned). Protocol 1.0 and 0.3, JSON-RPC binding only;
// every request leaves through the egress client (one origin per peer). docs/a2a.md.
//
// The header is light: RapidJSON, Beast and the pool live in src/host/a2a.
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "psych/host/bindings.hpp"
#include "psych/host/secret_resolver.hpp"
#include "psych/result.hpp"

namespace psych {

/// How to reach one A2A peer.
struct a2a_peer_config {
  /// The prefix of its bindings (`name__skill`): not empty, no "__".
  std::string name;
  /// The peer's base URL; its card is `<url>/.well-known/agent-card.json`. https, unless the host
  /// is loopback or allow_insecure_http. The card's JSON-RPC URL must be on the same origin.
  std::string url;
  /// Sent as "Authorization: Bearer <token>" on every request, resolved fresh for each; empty
  /// function: no credential. The token never appears in an outcome, a message or a log.
  secret_resolver token;
  /// PEM file the peer's certificate must chain to; default: the system's trust store.
  std::optional<std::string> ca_file;
  /// http:// to a host that is not loopback: only when the network in between is trusted.
  bool allow_insecure_http = false;
  /// Per call: from the SendMessage to the task's terminal state, whatever the peer does.
  std::chrono::milliseconds timeout{60000};
  /// The card's fetch.
  std::chrono::milliseconds start_timeout{10000};
  /// The card's body; one byte more and the card is refused (read again at the next offer).
  std::size_t max_card_bytes = 1 << 20;
  /// The body of each answer of a call (SendMessage's, GetTask's), and so the result's size.
  std::size_t max_result_bytes = 4 << 20;
};

/// Several A2A peers as one catalogue and invoker. A peer's card is read at the first
/// offered_now() (or the first call) and kept; a card that could not be read (unreachable,
/// refused, too large, not a card) offers nothing and is read again at the next offer. Calls run
/// on a pool of threads of its own (blocking_invoker), joined before the peers are destroyed.
///
/// Outcomes: a JSON value (docs/a2a.md, "The result"), or tool_failed (the task failed, was
/// rejected or canceled by the peer, a JSON-RPC error, an HTTP status), input_required (the task
/// needs input or authorisation a program cannot give), timeout and cancelled (CancelTask was
/// sent), unknown_tool, malformed_call, unavailable_binding (the card cannot be read now, or
/// nothing of the call reached the peer), unknown_outcome (the call may have reached the peer and
/// what happened is unknown: a broken answer, a lost connection).
class a2a_binding_source final : public tool_catalogue, public tool_invoker {
 public:
  /// invalid_argument for a name that is empty, contains "__" or is used twice, a timeout that is
  /// not positive, or a URL the egress client refuses (docs/egress.md). Nothing is sent.
  static result<std::unique_ptr<a2a_binding_source>> create(std::vector<a2a_peer_config> peers,
                                                            std::size_t threads = 4);
  ~a2a_binding_source() override;

  /// Reads every card not held yet, now: what a command line does at start, so that a peer it was
  /// told to reach and cannot is an error there (naming the peer and why), not a tool that is
  /// silently missing. The cards read are kept, as offered_now() keeps them.
  result<void> read_cards();

  std::vector<binding> offered_now() override;
  /// Every skill is allowed: an agent card has no mark of a destructive skill.
  call_permission permit(const tool_call& call) override;
  void invoke(const tool_call& call, std::stop_token stop, std::function<void(tool_outcome)> done) override;

 private:
  struct impl;
  explicit a2a_binding_source(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

}  // namespace psych
