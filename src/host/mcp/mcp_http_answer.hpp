#pragma once
// The answer to one MCP request over Streamable HTTP, read from the response body as its bytes
// arrive (mcp_http_client.cpp): one JSON message, or an event stream of messages in which the
// answer comes last, the server's own requests and notifications passed on as they come. Bounded:
// one message (a JSON body, one event) past max_message_bytes is a protocol_violation at once.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "http/sse_reader.hpp"
#include "psych/host/mcp.hpp"
#include "psych/json_text.hpp"

namespace psych::host {

/// The egress sink sees the body before the head's Content-Type can be asked, so the first byte
/// decides which it is (a JSON message begins with '{' or '[', an event stream never does); the
/// caller checks the head against body_shape() afterwards.
class mcp_http_answer {
 public:
  static constexpr std::size_t max_message_bytes = std::size_t{16} << 20;
  /// What is kept of the body's beginning, to quote (redacted, then cut) in an error.
  static constexpr std::size_t kept_bytes = 4096;

  struct handlers {
    /// A request of the server's inside the stream: (its raw id, its method). Called at once: the
    /// server may wait for its answer before it answers ours.
    std::function<void(const json_text& id, const std::string& method)> server_request;
    std::function<void(const std::string& method)> notification;
  };

  enum class shape { empty, json, event_stream };

  /// `who` names the server in messages ("the server web"); `id` is the request's; `credential`
  /// (empty for none) is redacted from any peer text a message quotes, before it is cut.
  mcp_http_answer(std::string who, std::int64_t id, std::string credential, handlers on);

  /// The egress sink: false (stop reading) once the answer, or why there is none, is known.
  bool feed(std::string_view chunk);
  /// After the body: a JSON message is read whole now.
  void finish();

  [[nodiscard]] shape body_shape() const noexcept { return shape_; }
  /// The body's first bytes, for an HTTP error's message (the caller redacts them, then cuts).
  [[nodiscard]] const std::string& first_bytes() const noexcept { return first_bytes_; }
  /// The raw `result`, or why there is none; nullopt while neither is known.
  std::optional<mcp_result<std::string>>& answer() noexcept { return answer_; }

 private:
  void settle_violation(std::string detail);
  void take_message(std::string_view text);
  /// Peer text as a message may quote it: the credential out first, then cut.
  [[nodiscard]] std::string quoted(std::string_view text, std::size_t limit) const;

  std::string who_;
  std::string id_text_;
  std::string credential_;
  handlers on_;
  shape shape_ = shape::empty;
  std::size_t leading_space_ = 0;
  std::string json_;
  sse_reader events_{max_message_bytes};
  std::string first_bytes_;
  std::optional<mcp_result<std::string>> answer_;
};

}  // namespace psych::host
