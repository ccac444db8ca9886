#include "mcp/mcp_http_answer.hpp"

#include <utility>

#include <fmt/format.h>

#include "mcp/json_rpc_wire.hpp"
#include "psych/protocol/json.hpp"

namespace psych::host {
namespace {

/// Messages may nest deeper than the launcher contract's frames (tool schemas, tool results).
constexpr protocol::json_bounds message_bounds{.max_bytes = mcp_http_answer::max_message_bytes, .max_depth = 256};

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

}  // namespace

mcp_http_answer::mcp_http_answer(std::string who, std::int64_t id, std::string credential, handlers on)
    : who_(std::move(who)), id_text_(std::to_string(id)), credential_(std::move(credential)), on_(std::move(on)) {}

std::string mcp_http_answer::quoted(std::string_view text, std::size_t limit) const {
  return peer_excerpt(redact(std::string(text), credential_), limit);
}

bool mcp_http_answer::feed(std::string_view chunk) {
  if (first_bytes_.size() < kept_bytes) first_bytes_.append(chunk.substr(0, kept_bytes - first_bytes_.size()));
  if (shape_ == shape::empty) {
    while (!chunk.empty() && is_json_space(chunk.front())) {
      chunk.remove_prefix(1);
      if (++leading_space_ > max_message_bytes) {
        settle_violation(fmt::format("{} sent over {} bytes of blank space", who_, max_message_bytes));
        return false;
      }
    }
    if (chunk.empty()) return true;
    shape_ = chunk.front() == '{' || chunk.front() == '[' ? shape::json : shape::event_stream;
  }
  if (shape_ == shape::json) {
    if (json_.size() + chunk.size() > max_message_bytes) {
      settle_violation(fmt::format("{} answered with a message over {} bytes", who_, max_message_bytes));
      return false;
    }
    json_.append(chunk);
    return true;
  }
  auto fed = events_.feed(chunk, [&](sse_event&& event) {
    if (!answer_ && !event.data.empty()) take_message(event.data);  // an empty event only primes a stream
  });
  if (!fed) settle_violation(fmt::format("{} sent an event stream that broke: {}", who_, quoted(fed.error().message(), 300)));
  return !answer_;
}

void mcp_http_answer::finish() {
  if (shape_ == shape::json && !answer_) take_message(json_);
}

void mcp_http_answer::settle_violation(std::string detail) {
  if (!answer_) answer_ = boost::outcome_v2::failure(mcp_error{mcp_error_kind::protocol_violation, std::move(detail)});
}

void mcp_http_answer::take_message(std::string_view text) {
  auto message = protocol::decode_json<json_rpc_wire::incoming>(text, message_bounds);
  if (!message) {
    settle_violation(fmt::format("{} sent a message that is not JSON-RPC ({}): {}", who_, quoted(message.error().message(), 200),
                                 quoted(text, 200)));
    return;
  }
  json_rpc_wire::incoming& m = message.value();
  if (m.method) {
    if (m.id) {
      if (on_.server_request) on_.server_request(*m.id, *m.method);
    } else if (on_.notification) {
      on_.notification(*m.method);
    }
    // In a stream, reading goes on to the answer; a JSON body has room for nothing else.
    if (shape_ == shape::json)
      settle_violation(fmt::format("{} answered with a {} message instead of the answer", who_, *m.method));
    return;
  }
  if (!m.id) {
    settle_violation(
        fmt::format("{} sent a message with neither id nor method: {}", who_, quoted(text, 200)));
    return;
  }
  if (m.id->text != id_text_) {
    settle_violation(fmt::format("{} answered request {} with the id {} of another request", who_, id_text_,
                                 quoted(m.id->text, 64)));
    return;
  }
  if (m.error) {
    answer_ = boost::outcome_v2::failure(mcp_error{mcp_error_kind::rpc_error, quoted(m.error->message, 1000), m.error->code});
    return;
  }
  if (!m.result) {
    settle_violation(fmt::format("{} answered request {} with neither result nor error", who_, id_text_));
    return;
  }
  // A server that echoes what it was sent must not hand the credential to a program.
  answer_ = redact(std::move(m.result->text), credential_);
}

}  // namespace psych::host
