#include "a2a/a2a_peer.hpp"

#include <algorithm>
#include <condition_variable>
#include <vector>

#include <fmt/format.h>

#include "a2a/task_wire.hpp"
#include "http/sse_reader.hpp"
#include "os/random_hex.hpp"
#include "psych/protocol/json.hpp"

namespace psych::host {
namespace {

using clock = std::chrono::steady_clock;

constexpr std::string_view card_path = "/.well-known/agent-card.json";
/// CancelTask's own deadline: sent when the call is already over, so it must not hold it long.
constexpr std::chrono::milliseconds cancel_timeout{2000};
/// GetTask's pause starts short (most tasks end soon) and doubles to this.
constexpr std::chrono::milliseconds first_poll_pause{50};
constexpr std::chrono::milliseconds longest_poll_pause{1000};
/// A body quoted in a message (an HTTP error's) is cut to this.
constexpr std::size_t quoted_body_bytes = 200;
/// A JSON answer to a streaming request (an error, or a peer that does not stream) is read up to this.
constexpr std::size_t max_plain_answer_bytes = 64 << 10;

std::string card_target(const std::string& base) {
  std::string target = base;
  while (!target.empty() && target.back() == '/') target.pop_back();
  return target + std::string(card_path);
}

std::string excerpt_of(std::string_view text) { return protocol::detail::excerpt(text, quoted_body_bytes); }

/// The outcome of a task in a state that ends the call.
tool_outcome final_outcome(std::string_view what, task_answer& task) {
  const std::string said = task.status_text.empty() ? std::string() : ": " + task.status_text;
  switch (task.state) {
    case a2a_task_state::completed: return tool_outcome::value(std::move(task.result_json));
    case a2a_task_state::input_required:
    case a2a_task_state::auth_required:
      return tool_outcome::error(tool_error_kind::input_required,
                                 fmt::format("{}: the task stopped at {}, which a program cannot answer{}", what,
                                             name_of(task.state), said));
    default:
      return tool_outcome::error(tool_error_kind::tool_failed, fmt::format("{}: the task ended {}{}", what, name_of(task.state), said));
  }
}

/// The outcome of a SendMessage that failed before the task's id was known: no CancelTask can
/// follow it.
tool_outcome before_task(std::string_view what, const egress_error& e, std::chrono::milliseconds timeout) {
  if (e.kind == egress_error_kind::cancelled) return tool_outcome::error(tool_error_kind::cancelled, fmt::format("{}: {}", what, e.message()));
  if (e.kind == egress_error_kind::timeout)
    return tool_outcome::error(tool_error_kind::timeout, fmt::format("{}: no answer to the message within {} ms", what, timeout.count()));
  if (!e.sent)
    return tool_outcome::error(tool_error_kind::unavailable_binding, fmt::format("{}: nothing reached the peer: {}", what, e.message()));
  return tool_outcome::error(tool_error_kind::unknown_outcome, fmt::format("{}: the message may have reached the peer: {}", what, e.message()));
}

/// An HTTP status that refuses the message. The body of a 401 or 403 is not quoted: a hostile peer
/// echoes the credential there.
std::optional<tool_outcome> refused_status(std::string_view what, unsigned status, std::string_view body) {
  if (status == 401 || status == 403)
    return tool_outcome::error(tool_error_kind::tool_failed, fmt::format("{}: the peer refused the request (HTTP {})", what, status));
  if (status == 200) return std::nullopt;
  const auto kind = status >= 500 ? tool_error_kind::unknown_outcome : tool_error_kind::tool_failed;
  return tool_outcome::error(kind, fmt::format("{}: HTTP {}: {}", what, status, excerpt_of(body)));
}

/// An answer to the message that cannot be read: it may have been accepted, except a JSON-RPC error.
tool_outcome unreadable_answer(std::string_view what, const answer_error& e) {
  if (e.fault == answer_fault::rpc_error)
    return tool_outcome::error(tool_error_kind::tool_failed, fmt::format("{}: JSON-RPC error {}: {}", what, e.code, e.detail));
  return tool_outcome::error(tool_error_kind::unknown_outcome,
                             fmt::format("{}: the answer to the message is {}: {}", what, name_of(e.fault), e.detail));
}

}  // namespace

/// One call's frame: its deadline, the execution's stop token, and every credential it sent, so
/// that whatever the peer echoes of them is redacted from the outcome.
struct a2a_peer::exchange_context {
  clock::time_point deadline;
  std::stop_token stop;
  std::vector<std::string> sent_tokens;
  std::int64_t next_id = 1;
  a2a_dialect dialect = a2a_dialect::v1_0;
  bool streaming = false;
  std::string rpc_target;

  [[nodiscard]] std::string redacted(std::string text) const {
    for (const auto& token : sent_tokens) text = redact(std::move(text), token);
    return text;
  }
};

a2a_peer::a2a_peer(a2a_peer_config config, std::unique_ptr<egress_client> client)
    : config_(std::move(config)), client_(std::move(client)) {}

result<std::unique_ptr<a2a_peer>> a2a_peer::create(a2a_peer_config config) {
  auto client = egress_client::create(config.url, {.ca_file = config.ca_file, .allow_insecure_http = config.allow_insecure_http});
  if (!client) return fail_with(error_kind::invalid_argument, fmt::format("A2A peer {}: {}", config.name, client.error().message()));
  return std::unique_ptr<a2a_peer>{new a2a_peer{std::move(config), std::move(client).value()}};
}

result<a2a_peer::known_card> a2a_peer::card() {
  std::lock_guard lock{card_mutex_};
  if (card_) return *card_;
  exchange_context context{.deadline = clock::now() + config_.start_timeout};
  egress_request request{.method = "GET", .target = card_target(client_->base_target())};
  request.headers.emplace_back("Accept", "application/json");
  if (config_.token) {
    auto token = config_.token();
    if (!token) return fail_with(error_kind::invalid_argument, "its credential could not be resolved: " + token.error().message());
    request.headers.emplace_back("Authorization", "Bearer " + token.value());
    context.sent_tokens.push_back(std::move(token).value());
  }
  auto answer = client_->fetch(request, {.deadline = context.deadline, .max_body_bytes = config_.max_card_bytes}, {});
  if (!answer)
    return fail_with(error_kind::unreadable_file,
                     context.redacted(fmt::format("its agent card ({}) could not be read: {}", request.target, answer.error().message())));
  const auto status = answer.value().head.status;
  if (status == 401 || status == 403)
    return fail_with(error_kind::unreadable_file, fmt::format("its agent card was refused (HTTP {}): check the peer's credential", status));
  if (status != 200)
    return fail_with(error_kind::unreadable_file,
                     context.redacted(fmt::format("its agent card could not be read: HTTP {}: {}", status, excerpt_of(answer.value().body))));
  auto card = read_agent_card(answer.value().body);
  if (!card) return fail_with(card.error().kind, context.redacted("its agent card is not usable: " + card.error().detail));
  auto target = client_->target_of(card.value().rpc_url);
  if (!target)
    return fail_with(error_kind::invalid_argument,
                     context.redacted(fmt::format("its agent card sends requests to {}, another origin than {}: {}",
                                                  excerpt_of(card.value().rpc_url), origin_text(client_->origin()),
                                                  target.error().message())));
  card_ = known_card{std::move(card).value(), std::move(target).value()};
  return *card_;
}

egress_result<egress_request> a2a_peer::request_for(exchange_context& context, std::string body, std::string_view accept) {
  egress_request request{.method = "POST", .target = context.rpc_target, .body = std::move(body)};
  request.headers.emplace_back("Content-Type", "application/json");
  request.headers.emplace_back("Accept", std::string(accept));
  // Without it the SDKs take a request for 0.3's.
  if (context.dialect == a2a_dialect::v1_0) request.headers.emplace_back("A2A-Version", "1.0");
  if (config_.token) {
    auto token = config_.token();
    if (!token)
      return boost::outcome_v2::failure(
          egress_error{egress_error_kind::refused, "its credential could not be resolved: " + token.error().message(), false});
    request.headers.emplace_back("Authorization", "Bearer " + token.value());
    if (std::ranges::find(context.sent_tokens, token.value()) == context.sent_tokens.end())
      context.sent_tokens.push_back(std::move(token).value());
  }
  return request;
}

egress_result<egress_response> a2a_peer::post(exchange_context& context, std::string body, clock::time_point deadline,
                                              std::stop_token stop) {
  auto request = request_for(context, std::move(body), "application/json");
  if (!request) return boost::outcome_v2::failure(std::move(request).error());
  return client_->fetch(request.value(), {.deadline = deadline, .max_body_bytes = config_.max_result_bytes}, std::move(stop));
}

bool a2a_peer::cancel(exchange_context& context, const std::string& task_id) {
  const auto id = context.next_id++;
  auto answer = post(context, cancel_task_body(context.dialect, id, task_id), clock::now() + cancel_timeout, {});
  return answer && answer.value().head.status == 200 && read_answer(context.dialect, answer.value().body, id).has_value();
}

tool_outcome a2a_peer::call(std::string_view skill, std::string_view arguments_json, std::stop_token stop) {
  auto known = card();
  if (!known)
    return tool_outcome::error(tool_error_kind::unavailable_binding, fmt::format("A2A peer {}: {}", name(), known.error().detail));
  exchange_context context{.deadline = clock::now() + config_.timeout, .stop = std::move(stop),
                           .dialect = known.value().card.dialect,
                           .streaming = known.value().card.streaming, .rpc_target = known.value().rpc_target};
  tool_outcome outcome = run_call(context, skill, arguments_json);
  // A hostile peer may echo the credential anywhere: in a status message, an error, an artifact.
  outcome.message = context.redacted(std::move(outcome.message));
  if (outcome.ok) outcome.value_json = context.redacted(std::move(outcome.value_json));
  return outcome;
}

tool_outcome a2a_peer::run_call(exchange_context& context, std::string_view skill, std::string_view arguments_json) {
  const auto what = fmt::format("A2A peer {}, skill {}", name(), skill);
  if (context.streaming) return stream_call(context, what, skill, arguments_json);
  const auto id = context.next_id++;
  auto answer = post(context, send_message_body(context.dialect, id, skill, arguments_json, random_hex(16)), context.deadline,
                     context.stop);
  if (!answer) return before_task(what, answer.error(), config_.timeout);
  if (auto refused = refused_status(what, answer.value().head.status, answer.value().body)) return *std::move(refused);
  return after_send(context, what, answer.value().body, id);
}

tool_outcome a2a_peer::after_send(exchange_context& context, std::string_view what, std::string_view body, std::int64_t id) {
  auto read = read_answer(context.dialect, body, id);
  if (!read) return unreadable_answer(what, read.error());
  task_answer& task = read.value();
  if (!task.is_task) return tool_outcome::value(std::move(task.result_json));
  if (ends_the_call(task.state))
    return final_outcome(fmt::format("A2A peer {}, task {}", name(), excerpt_of(task.task_id)), task);
  return follow(context, task.task_id);
}

tool_outcome a2a_peer::stream_call(exchange_context& context, std::string_view what, std::string_view skill,
                                   std::string_view arguments_json) {
  const auto id = context.next_id++;
  auto request = request_for(context, send_message_body(context.dialect, id, skill, arguments_json, random_hex(16), true),
                             "text/event-stream, application/json");
  if (!request) return before_task(what, request.error(), config_.timeout);
  task_stream events{context.dialect, id, config_.max_result_bytes};
  sse_reader reader{config_.max_result_bytes};
  std::optional<answer_error> fault;
  std::optional<egress_error> broken;
  std::string plain;  // the body's start, for a peer that answers JSON (an error) instead of a stream
  const auto sink = [&](std::string_view chunk) {
    if (plain.size() < max_plain_answer_bytes) plain.append(chunk.substr(0, max_plain_answer_bytes - plain.size()));
    auto fed = reader.feed(chunk, [&](sse_event&& event) {
      if (fault || events.ended()) return;
      if (auto taken = events.take(event.data); !taken) fault = taken.error();
    });
    if (!fed) broken = fed.error();
    return !fault && !broken && !events.ended();
  };
  auto head = client_->exchange(request.value(), {.deadline = context.deadline, .max_body_bytes = config_.max_result_bytes},
                                context.stop, sink);
  const std::string task_id = events.task_id();
  if (!head) {
    const egress_error& e = head.error();
    if (task_id.empty()) return before_task(what, e, config_.timeout);
    if (e.kind == egress_error_kind::cancelled) return abandon(context, task_id, tool_error_kind::cancelled, "the call was cancelled");
    if (e.kind == egress_error_kind::timeout)
      return abandon(context, task_id, tool_error_kind::timeout, fmt::format("not finished within {} ms", config_.timeout.count()));
    if (e.kind == egress_error_kind::too_large)
      return abandon(context, task_id, tool_error_kind::unknown_outcome, "its stream is over the result's bound: " + e.message());
    return follow(context, task_id);  // the stream broke; the task goes on, and GetTask follows it
  }
  if (auto refused = refused_status(what, head.value().status, plain)) return *std::move(refused);
  if (head.value().header("Content-Type").starts_with("application/json")) return after_send(context, what, plain, id);
  if (broken || fault) {
    const std::string why = broken ? "its stream is " + broken->message()
                                   : fmt::format("its stream's event is {}: {}", name_of(fault->fault), fault->detail);
    if (task_id.empty()) return fault ? unreadable_answer(what, *fault) : tool_outcome::error(tool_error_kind::unknown_outcome, fmt::format("{}: {}", what, why));
    return abandon(context, task_id, tool_error_kind::unknown_outcome, why);
  }
  if (events.ended()) {
    auto answer = events.answer();
    if (!answer.is_task) return tool_outcome::value(std::move(answer.result_json));
    return final_outcome(fmt::format("A2A peer {}, task {}", name(), excerpt_of(task_id)), answer);
  }
  if (!task_id.empty()) return follow(context, task_id);  // the stream ended before the task did
  return tool_outcome::error(tool_error_kind::unknown_outcome, fmt::format("{}: the stream ended before it named its task", what));
}

tool_outcome a2a_peer::abandon(exchange_context& context, const std::string& task_id, tool_error_kind kind, std::string_view why) {
  const bool accepted = cancel(context, task_id);
  return tool_outcome::error(kind, fmt::format("A2A peer {}, task {}: {}; CancelTask {}", name(), excerpt_of(task_id), why,
                                               accepted ? "accepted" : "sent, not accepted"));
}

tool_outcome a2a_peer::follow(exchange_context& context, const std::string& task_id) {
  const auto what = fmt::format("A2A peer {}, task {}", name(), excerpt_of(task_id));
  const auto abandon = [&](tool_error_kind kind, std::string_view why) { return this->abandon(context, task_id, kind, why); };
  std::mutex pause_mutex;
  std::condition_variable_any pause;
  auto wait = first_poll_pause;
  bool first = true;
  for (;;) {
    if (!first) {
      std::unique_lock lock{pause_mutex};
      pause.wait_until(lock, context.stop, std::min(context.deadline, clock::now() + wait), [] { return false; });
      wait = std::min(wait * 2, longest_poll_pause);
    }
    first = false;
    if (context.stop.stop_requested()) return abandon(tool_error_kind::cancelled, "the call was cancelled");
    if (clock::now() >= context.deadline)
      return abandon(tool_error_kind::timeout, fmt::format("not finished within {} ms", config_.timeout.count()));
    const auto id = context.next_id++;
    auto answer = post(context, get_task_body(context.dialect, id, task_id), context.deadline, context.stop);
    if (!answer) {
      const egress_error& e = answer.error();
      if (e.kind == egress_error_kind::cancelled) return abandon(tool_error_kind::cancelled, "the call was cancelled");
      if (e.kind == egress_error_kind::timeout)
        return abandon(tool_error_kind::timeout, fmt::format("not finished within {} ms", config_.timeout.count()));
      return abandon(tool_error_kind::unknown_outcome, "GetTask failed: " + e.message());
    }
    if (answer.value().head.status != 200)
      return abandon(tool_error_kind::unknown_outcome,
                     fmt::format("GetTask answered HTTP {}{}", answer.value().head.status,
                                 answer.value().head.status == 401 || answer.value().head.status == 403
                                     ? std::string()
                                     : ": " + excerpt_of(answer.value().body)));
    auto read = read_answer(context.dialect, answer.value().body, id);
    if (!read)
      return abandon(tool_error_kind::unknown_outcome,
                     fmt::format("GetTask's answer is {}: {}", name_of(read.error().fault), read.error().detail));
    task_answer& task = read.value();
    if (!task.is_task || task.task_id != task_id)
      return abandon(tool_error_kind::unknown_outcome, "GetTask answered about another task");
    if (!ends_the_call(task.state)) continue;
    return final_outcome(what, task);
  }
}

}  // namespace psych::host
