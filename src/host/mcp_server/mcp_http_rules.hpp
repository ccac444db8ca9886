#pragma once
// The Streamable HTTP transport's decisions about one request, pure and apart from the I/O
// (mcp_http.cpp): which origins may call, what an Accept header takes, what a message is before its
// session reads it, and the words and codes of a refusal.
#include <optional>
#include <string>
#include <string_view>

#include "psych/host/mcp_http_server.hpp"

namespace psych::host::mcp_http {

inline constexpr std::string_view endpoint = "/mcp";
inline constexpr std::string_view session_header = "Mcp-Session-Id";
inline constexpr std::string_view version_header = "MCP-Protocol-Version";
inline constexpr std::string_view event_stream = "text/event-stream";

/// Whether a request target is the endpoint (a query string is ignored).
bool is_endpoint(std::string_view target);

/// Whether a request with this Origin header may be served: no header, a loopback origin
/// (http(s)://localhost, 127.0.0.0/8, [::1], any port) or one whose host is `listen_host`.
bool origin_allowed(std::optional<std::string_view> origin, std::string_view listen_host);

/// Whether an Accept header lists text/event-stream (not at q=0).
bool accepts_event_stream(std::string_view accept);

/// Whether an MCP-Protocol-Version header names a version the server speaks.
bool speaks_version(std::string_view version);

/// What the transport needs to know of a message before its session reads it.
struct message_outline {
  std::string method;              ///< empty: none (a response, or not a JSON-RPC object)
  std::optional<std::string> id;   ///< a request's id, as its JSON text
  /// notifications/cancelled: the requestId it names, as its JSON text.
  std::optional<std::string> cancelled_id;
};
message_outline outline_of(std::string_view message);

/// A refusal's HTTP status.
unsigned status_of(mcp_http_refusal why);
/// A refusal's body: a JSON-RPC error with id null, its message "<name>: <words>".
std::string refusal_body(mcp_http_refusal why, std::string_view words);

/// One SSE event of type `message` carrying a JSON text (whose lines each become a data line).
std::string sse_event(std::string_view json);

}  // namespace psych::host::mcp_http
