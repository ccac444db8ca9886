#pragma once
// psych mcp over MCP's Streamable HTTP transport (`psych mcp --listen`, docs/mcp-server-http.md):
// one endpoint, /mcp, a session (mcp_server.hpp) per Mcp-Session-Id, each answer on the POST that
// asked for it, as one JSON body or as an SSE stream that carries run_code's progress first.
// Protocol versions 2025-06-18 and 2025-11-25 (mcp_server_versions).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "psych/host/mcp_server.hpp"
#include "psych/host/service_stats.hpp"
#include "psych/names.hpp"
#include "psych/result.hpp"

namespace psych {

struct mcp_http_options {
  std::string listen_host = "127.0.0.1";
  std::uint16_t port = 0;  ///< 0: any free port (port() says which)
  /// PEM certificate chain and key. Without them the server speaks plaintext HTTP, which it
  /// refuses on an address that is not loopback unless allow_insecure_http.
  std::optional<std::string> tls_cert_file, tls_key_file;
  bool allow_insecure_http = false;
  /// One credential per line: "<name> <token>" or just "<token>" (psych serve's format). Every
  /// request needs one as `Authorization: Bearer <token>`. Re-read by reload_tokens().
  std::string token_file;
  /// Sessions open at once; one more initialize is answered 503.
  std::size_t max_sessions = 64;
  /// Open connections; one more is closed as soon as it is accepted.
  std::size_t max_connections = 256;
  /// POSTs of one session being answered at once (an SSE stream counts until it ends); one more
  /// is answered 429, so that a flood cannot queue without bound.
  std::size_t max_requests_in_flight = 64;
  /// The TLS handshake, and each request's header and body, must arrive within this.
  double request_timeout_seconds = 10;
  /// A kept-alive connection with no request for this long is closed.
  double idle_timeout_seconds = 60;
  /// Each write of an answer or of an SSE event must be taken by the client within this; a client
  /// that stops reading has its connection closed (its executions go on; their answers are dropped).
  double write_timeout_seconds = 30;
  /// A session with no request for this long, and none being answered, is cancelled and forgotten.
  double session_expiry_seconds = 30 * 60;
  /// The largest POST body: one JSON-RPC message. A longer one is answered 413 unread.
  std::uint64_t max_request_bytes = std::uint64_t{4} << 20;
  /// Bytes of one response stream queued but not yet taken by the client: past it run_code's
  /// progress notifications are dropped (an answer never is).
  std::size_t max_unsent_bytes = std::size_t{1} << 20;
};

/// Why a request was answered with an error instead of being handed to its session. The body of
/// every refusal is a JSON-RPC error (id null) whose message begins with the refusal's name.
enum class mcp_http_refusal {
  /// 401 (with WWW-Authenticate: Bearer): no bearer token, or one the token file does not hold.
  unauthorized,
  /// 403: an Origin header that is neither a loopback origin nor the listen host's. A browser page
  /// that rebinds a name to this machine sends its own origin (MCP requires the check).
  forbidden_origin,
  /// 404: a path other than /mcp.
  no_such_path,
  /// 405: GET (this server opens no stream of its own) or a method other than POST and DELETE.
  method_not_allowed,
  /// 400: a POST other than initialize, or a DELETE, without an Mcp-Session-Id header.
  missing_session_id,
  /// 404: an Mcp-Session-Id the server does not hold: never made, expired, deleted, or another
  /// credential's (a session answers only the token that opened it). The client starts a new
  /// session with initialize.
  unknown_session,
  /// 400: an MCP-Protocol-Version header naming a version the server does not speak.
  unsupported_protocol_version,
  /// 400: a message its session did not accept (not JSON, a batch, the wrong shape, a cancel for a
  /// request the session never had). The body is the session's own JSON-RPC error.
  rejected_message,
  /// 413 or 431: a body over max_request_bytes, or a header over its bound.
  too_large,
  /// 503: max_sessions sessions are open, so an initialize is refused.
  too_many_sessions,
  /// 429: max_requests_in_flight POSTs of the session are being answered.
  too_many_requests,
  /// 500: a session could not be opened (its run log file, most likely); the message says why.
  session_failed,
  /// 503: the server is shutting down.
  shutting_down,
};
PSYCH_ENUM_NAMES(mcp_http_refusal, "unauthorized", "forbidden_origin", "no_such_path", "method_not_allowed",
                 "missing_session_id", "unknown_session", "unsupported_protocol_version", "rejected_message",
                 "too_large", "too_many_sessions", "too_many_requests", "session_failed",
                 "shutting_down");

/// What the server counts, for an operator and for its tests.
struct mcp_http_stats {
  std::size_t sessions = 0;     ///< open now
  std::size_t connections = 0;  ///< open now
  std::uint64_t sessions_opened = 0, sessions_expired = 0, sessions_deleted = 0;
  /// Progress notifications dropped because their stream's client had fallen behind.
  std::uint64_t progress_dropped = 0;
  /// Answers that had nowhere to go: their POST's client went away, or stopped reading.
  std::uint64_t answers_undelivered = 0;
  count_by<mcp_http_refusal> refused;
};

class mcp_http_server {
 public:
  /// Reads the tokens, binds and starts serving on a thread of its own. `sessions` is what every
  /// session gets; its pointers must outlive the server. Errors: an unreadable token file or
  /// certificate, plaintext on a non-loopback address, an address that cannot be bound.
  static result<std::unique_ptr<mcp_http_server>> start(const mcp_server_options& sessions, mcp_http_options options);
  ~mcp_http_server();  ///< shutdown(), if it was not called
  mcp_http_server(const mcp_http_server&) = delete;
  mcp_http_server& operator=(const mcp_http_server&) = delete;

  [[nodiscard]] std::uint16_t port() const;
  /// Reads the token file again; on an error the old tokens stay.
  result<void> reload_tokens();
  /// Stops accepting, closes every connection, cancels every session's executions and waits for
  /// them to end (their process trees gone).
  void shutdown();
  [[nodiscard]] mcp_http_stats stats() const;

  struct impl;

 private:
  explicit mcp_http_server(std::unique_ptr<impl> state);
  std::unique_ptr<impl> impl_;
};

}  // namespace psych
