// MCP over Streamable HTTP (include/psych/host/mcp_http_client.hpp): the transport under an
// mcp_client session. Every request is a POST of its own through the egress seam; its answer
// (mcp_http_answer) is one JSON body or an SSE stream, read with bounds as the bytes arrive, the
// server's pings in it answered by a POST. A request is never sent twice, whatever happened to it.
#include "psych/host/mcp_http_client.hpp"

#include <atomic>
#include <cctype>
#include <limits>
#include <mutex>
#include <utility>

#include <fmt/format.h>

#include "http/egress.hpp"
#include "mcp/json_rpc_wire.hpp"
#include "mcp/mcp_http_answer.hpp"
#include "mcp/mcp_transport.hpp"
#include "psych/protocol/json.hpp"

namespace psych {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

constexpr std::size_t max_session_id_bytes = 1024;
/// notifications/cancelled after a call is abandoned, and the DELETE that ends the session: best
/// effort, and never long past the call's own deadline.
constexpr auto courtesy_limit = 500ms;
/// The notifications the client sends (notifications/initialized) and the answers to pings.
constexpr auto notification_limit = 5000ms;

auto fail(mcp_error_kind kind, std::string detail, std::int64_t code = 0) {
  return boost::outcome_v2::failure(mcp_error{kind, std::move(detail), code});
}

bool starts_with_ignoring_case(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(text[i])) != std::tolower(static_cast<unsigned char>(prefix[i])))
      return false;
  return true;
}

/// A session id as MCP allows it: visible ASCII only, and bounded here.
bool valid_session_id(std::string_view id) {
  if (id.empty() || id.size() > max_session_id_bytes) return false;
  for (const char c : id)
    if (c < 0x21 || c > 0x7E) return false;
  return true;
}

class http_transport final : public host::mcp_transport {
 public:
  http_transport(const mcp_server_config& config, std::unique_ptr<host::egress_client> egress)
      : name_(config.name), token_(config.token), egress_(std::move(egress)) {}

  /// Ends the session: a DELETE with its id (best effort; a server may answer 405).
  ~http_transport() override {
    auto session = session_headers();
    if (!session.session_id) return;
    auto credential = resolve_credential();
    if (!credential) return;
    (void)egress_->fetch(post_like("DELETE", credential.value(), session, {}), {.deadline = steady::now() + courtesy_limit,
                                                                          .max_body_bytes = 4096},
                         {});
  }

  mcp_result<std::string> request(std::string_view method, std::string params_json, std::chrono::milliseconds timeout,
                                  std::stop_token stop, bool cancellable) override {
    const auto deadline = steady::now() + timeout;
    const std::int64_t id = next_id_++;
    const bool initializing = method == "initialize";
    const std::string who = fmt::format("{} on the server {}", method, name_);
    BOOST_OUTCOME_TRY(auto credential, resolve_credential());
    session_state session = initializing ? session_state{} : session_headers();

    host::mcp_http_answer reader{
        fmt::format("the server {}", name_), id, credential,
        host::mcp_http_answer::handlers{
            .server_request = [&](const json_text& their_id,
                                  const std::string& their_method) { answer(their_id, their_method, deadline); },
            .notification = [this](const std::string& their_method) { server_notified(their_method); }}};
    const host::egress_request post =
        post_like("POST", credential, session,
                  protocol::encode_json(json_rpc_wire::request_out{
                      .id = id, .method = std::string(method), .params = json_text{std::move(params_json)}}));
    auto head = egress_->exchange(post,
                                  {.deadline = deadline,
                                   // Each message is bounded by the reader; a stream of them, by the deadline.
                                   .max_body_bytes = std::numeric_limits<std::size_t>::max()},
                                  stop, [&](std::string_view chunk) { return reader.feed(chunk); });
    if (!head) {
      const host::egress_error& e = head.error();
      const std::string detail = fmt::format("{}: {}", who, redacted(e.message(), credential));
      switch (e.kind) {
        case host::egress_error_kind::timeout:
        case host::egress_error_kind::cancelled:
          if (cancellable && e.sent)
            cancel(id, e.kind == host::egress_error_kind::cancelled ? "cancelled by the caller" : "timed out");
          return fail(e.kind == host::egress_error_kind::timeout ? mcp_error_kind::timeout : mcp_error_kind::cancelled,
                      detail);
        case host::egress_error_kind::refused: return fail(mcp_error_kind::refused, detail);
        case host::egress_error_kind::unreachable: return fail(mcp_error_kind::unreachable, detail);
        case host::egress_error_kind::connection_lost:
          return fail(e.sent ? mcp_error_kind::connection_lost : mcp_error_kind::unreachable, detail);
        case host::egress_error_kind::too_large:
        case host::egress_error_kind::malformed: return fail(mcp_error_kind::protocol_violation, detail);
      }
      return fail(mcp_error_kind::connection_lost, detail);
    }
    BOOST_OUTCOME_TRY(check_status(head.value(), who, session, reader.first_bytes(), credential));
    BOOST_OUTCOME_TRY(check_content_type(head.value(), who, reader.body_shape()));
    if (initializing) {
      BOOST_OUTCOME_TRY(begin_session(head.value(), who));
    }

    reader.finish();
    if (!reader.answer()) {
      if (reader.body_shape() == host::mcp_http_answer::shape::empty)
        return fail(mcp_error_kind::protocol_violation, fmt::format("{}: the server answered with no body", who));
      return fail(mcp_error_kind::connection_lost,
                  fmt::format("{}: the server's event stream ended before the answer", who));
    }
    mcp_result<std::string> answer = std::move(*reader.answer());
    // A JSON-RPC error's detail is the server's message alone, as over stdio.
    if (answer || answer.error().kind == mcp_error_kind::rpc_error) return answer;
    mcp_error e = std::move(answer).error();
    e.detail = fmt::format("{}: {}", who, e.detail);
    return boost::outcome_v2::failure(std::move(e));
  }

  void notify(std::string_view method, std::string params_json) override {
    auto credential = resolve_credential();
    if (!credential) return;
    const session_state session = session_headers();
    auto head = egress_->exchange(
        post_like("POST", credential.value(), session,
                  protocol::encode_json(json_rpc_wire::notification_out{.method = std::string(method),
                                                                        .params = json_text{std::move(params_json)}})),
        {.deadline = steady::now() + notification_limit, .max_body_bytes = 4096}, {},
        [](std::string_view) { return false; });
    if (head && head.value().status == 404 && session.session_id) lose_session(*session.session_id);
  }

  void session_began(std::string_view protocol_version) override {
    std::lock_guard lock{mutex_};
    protocol_version_ = protocol_version;
  }

  [[nodiscard]] bool session_lost() const override {
    std::lock_guard lock{mutex_};
    return lost_;
  }

  /// Each request is an exchange of its own: nothing one did spoils the next.
  [[nodiscard]] std::optional<mcp_error> broken() const override { return std::nullopt; }

 private:
  struct session_state {
    std::optional<std::string> session_id;
    std::optional<std::string> protocol_version;
  };

  session_state session_headers() const {
    std::lock_guard lock{mutex_};
    session_state s;
    if (!session_id_.empty()) s.session_id = session_id_;
    if (!protocol_version_.empty()) s.protocol_version = protocol_version_;
    return s;
  }

  /// The credential, fresh for this request ("" for none).
  mcp_result<std::string> resolve_credential() const {
    if (!token_) return std::string{};
    auto token = token_();
    if (!token)
      return fail(mcp_error_kind::no_credential, fmt::format("the credential of the server {} could not be resolved: {}",
                                                             name_, token.error().message()));
    if (token.value().empty())
      return fail(mcp_error_kind::no_credential, fmt::format("the credential of the server {} is empty", name_));
    if (token.value().find_first_of("\r\n") != std::string::npos)
      return fail(mcp_error_kind::no_credential,
                  fmt::format("the credential of the server {} has a line break in it", name_));
    return std::move(token).value();
  }

  host::egress_request post_like(std::string method, const std::string& credential, const session_state& session,
                                 std::string body) const {
    host::egress_request r{.method = std::move(method), .target = egress_->base_target(), .headers = {},
                           .body = std::move(body)};
    if (!r.body.empty()) r.headers.emplace_back("Content-Type", "application/json");
    r.headers.emplace_back("Accept", "application/json, text/event-stream");
    if (!credential.empty()) r.headers.emplace_back("Authorization", "Bearer " + credential);
    if (session.session_id) r.headers.emplace_back("Mcp-Session-Id", *session.session_id);
    if (session.protocol_version) r.headers.emplace_back("MCP-Protocol-Version", *session.protocol_version);
    return r;
  }

  static std::string redacted(std::string text, const std::string& credential) {
    return host::redact(std::move(text), credential);
  }
  /// Peer text as a message may quote it: the credential out first, then cut.
  static std::string quoted(std::string_view text, const std::string& credential, std::size_t limit) {
    return host::peer_excerpt(host::redact(std::string(text), credential), limit);
  }

  mcp_result<void> check_status(const host::egress_response_head& head, const std::string& who,
                                const session_state& session, const std::string& first_bytes,
                                const std::string& credential) {
    const unsigned status = head.status;
    if (status == 200) return boost::outcome_v2::success();
    if (status == 202)
      return fail(mcp_error_kind::protocol_violation,
                  fmt::format("{}: the server accepted the request (HTTP 202) without answering it", who));
    if (status >= 300 && status < 400)
      return fail(mcp_error_kind::refused,
                  fmt::format("{}: the server redirected it (HTTP {}) to {}; a POST is never sent again", who, status,
                              quoted(head.header("Location"), credential, 200)));
    if (status == 401 || status == 403)  // its body may quote the credential: never read
      return fail(mcp_error_kind::unauthorized, fmt::format("{}: the server refused the credential (HTTP {})", who, status));
    if (status == 404 && session.session_id) {
      lose_session(*session.session_id);
      return fail(mcp_error_kind::session_expired,
                  fmt::format("{}: the server no longer knows the session (HTTP 404); the request is not sent again, "
                              "the next one begins a new session",
                              who));
    }
    return fail(mcp_error_kind::http_error,
                fmt::format("{}: the server answered HTTP {}: {}", who, status, quoted(first_bytes, credential, 300)),
                status);
  }

  static mcp_result<void> check_content_type(const host::egress_response_head& head, const std::string& who,
                                             host::mcp_http_answer::shape shape) {
    const std::string_view type = head.header("Content-Type");
    const bool json = starts_with_ignoring_case(type, "application/json");
    const bool events = starts_with_ignoring_case(type, "text/event-stream");
    if (!json && !events)
      return fail(mcp_error_kind::protocol_violation,
                  fmt::format("{}: the server answered with the content type \"{}\", neither JSON nor an event stream",
                              who, host::peer_excerpt(type, 100)));
    if ((json && shape == host::mcp_http_answer::shape::event_stream) || (events && shape == host::mcp_http_answer::shape::json))
      return fail(mcp_error_kind::protocol_violation,
                  fmt::format("{}: the server's body is not the {} its Content-Type says", who,
                              json ? "JSON" : "event stream"));
    return boost::outcome_v2::success();
  }

  /// The session id initialize's answer gave (a server may give none: then it keeps no session).
  mcp_result<void> begin_session(const host::egress_response_head& head, const std::string& who) {
    const std::string_view id = head.header("Mcp-Session-Id");
    if (!id.empty() && !valid_session_id(id))
      return fail(mcp_error_kind::protocol_violation,
                  fmt::format("{}: the server gave a session id that is not visible ASCII of at most {} bytes", who,
                              max_session_id_bytes));
    std::lock_guard lock{mutex_};
    session_id_ = id;
    protocol_version_.clear();
    lost_ = false;
    tools_may_have_changed();
    return boost::outcome_v2::success();
  }

  /// The server no longer knows `lost_id`: the next request initializes again (unless a newer
  /// session has begun since).
  void lose_session(const std::string& lost_id) {
    std::lock_guard lock{mutex_};
    if (session_id_ != lost_id) return;
    session_id_.clear();
    protocol_version_.clear();
    lost_ = true;
  }

  /// Answers a request the server made inside a stream (ping; anything else is "method not found").
  void answer(const json_text& their_id, const std::string& their_method, steady::time_point deadline) {
    auto result = answer_server_request(their_method);
    std::string reply =
        result ? protocol::encode_json(json_rpc_wire::reply_result_out{.id = their_id, .result = json_text{*result}})
               : protocol::encode_json(json_rpc_wire::reply_error_out{
                     .id = their_id, .error = {.code = -32601, .message = "Method not found: " + their_method}});
    send_best_effort(std::move(reply), std::min(deadline, steady::now() + notification_limit));
  }

  /// notifications/cancelled for an abandoned request; a late answer has nowhere to go.
  void cancel(std::int64_t id, std::string reason) {
    send_best_effort(protocol::encode_json(json_rpc_wire::notification_out{
                         .method = "notifications/cancelled",
                         .params = json_text{protocol::encode_json(
                             json_rpc_wire::cancelled_params{.requestId = id, .reason = std::move(reason)})}}),
                     steady::now() + courtesy_limit);
  }

  void send_best_effort(std::string body, steady::time_point deadline) {
    auto credential = resolve_credential();
    if (!credential) return;
    (void)egress_->exchange(post_like("POST", credential.value(), session_headers(), std::move(body)),
                            {.deadline = deadline, .max_body_bytes = 4096}, {}, [](std::string_view) { return false; });
  }

  std::string name_;
  secret_resolver token_;
  std::unique_ptr<host::egress_client> egress_;
  std::atomic<std::int64_t> next_id_{1};
  mutable std::mutex mutex_;     ///< guards the three below
  std::string session_id_;       ///< empty: none (before initialize, or a server without sessions)
  std::string protocol_version_;  ///< empty until the handshake is done
  bool lost_ = false;
};

}  // namespace

mcp_result<std::unique_ptr<mcp_client>> start_mcp_http_client(const mcp_server_config& config) {
  if (config.url.empty())
    return fail(mcp_error_kind::invalid_config, fmt::format("the server {} has no url", config.name));
  if (!config.command.empty())
    return fail(mcp_error_kind::invalid_config,
                fmt::format("the server {} has both a url and a command: it is reached one way", config.name));
  auto egress = host::egress_client::create(
      config.url, {.ca_file = config.ca_file, .allow_insecure_http = config.allow_insecure_http});
  if (!egress)
    return fail(mcp_error_kind::invalid_config, fmt::format("the server {}: {}", config.name, egress.error().message()));
  return mcp_client::over(config, std::make_unique<http_transport>(config, std::move(egress).value()));
}

}  // namespace psych
