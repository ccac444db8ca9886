#pragma once
// An MCP server over Streamable HTTP (protocol versions 2025-06-18 and 2025-11-25) as an
// mcp_client (mcp.hpp), so mcp_binding_source offers its tools as it does a stdio server's. It
// lives in psych::remote, with the rest of psych's HTTP (Beast, OpenSSL): docs/mcp-http-client.md.
#include <memory>

#include "psych/host/mcp.hpp"

namespace psych {

/// Reaches `config.url` (set, with `command` empty) and opens the session: `initialize`, then
/// `notifications/initialized`, within start_timeout (or timeout). Every request is a POST of its
/// own through the egress seam (one origin; https unless loopback or allow_insecure_http; its
/// timeout is the exchange's deadline), with the bearer token resolved fresh each time.
///
/// invalid_config for a configuration without a url, with a command too, with a URL that is not
/// one or that is http:// off loopback, with a CA file that cannot be read, or with a timeout that
/// is not positive; nothing was sent. Otherwise the errors of the handshake (mcp_error_kind).
mcp_result<std::unique_ptr<mcp_client>> start_mcp_http_client(const mcp_server_config& config);

}  // namespace psych
