#pragma once
// psych-remote's binding sources over HTTP (docs/http-sources.md): the MCP servers over Streamable
// HTTP, the A2A peers and the HTTP tools a command names, each credential from its token command,
// run afresh for every request.
#include <chrono>
#include <optional>

#include "commands.hpp"
#include "mcp_servers.hpp"

namespace psych::cli {

/// An http_source_starter: each source within `start_timeout` (an MCP server's initialize, a peer's
/// agent card), added to `into` as one source per kind. The first that fails is invalid_argument
/// naming it.
result<void> start_http_sources(const upstream_config& config, std::optional<std::chrono::milliseconds> start_timeout,
                                started_upstream& into);

}  // namespace psych::cli
