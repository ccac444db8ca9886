#pragma once
// The MCP servers `psych run` starts: each --mcp NAME=COMMAND, and the servers of an --mcp-config
// file in the format MCP clients already share:
//   {"mcpServers": {"fs": {"command": "npx", "args": ["-y", "server", "/my dir"], "env": {"K": "v"}}}}
#include <string>
#include <vector>

#include "cli.hpp"
#include "psych/host/mcp.hpp"

namespace psych::cli {

/// The servers of the config file at `path`, in their names' order. Each entry is checked
/// strictly (command, args, env and an optional "type": "stdio"; anything else is an error naming
/// the file and the member); other top-level members are left to the client they belong to.
result<std::vector<mcp_server_config>> load_mcp_config(const std::string& path);

/// Every server the run asks for: the config file's, then each --mcp in its order.
result<std::vector<mcp_server_config>> mcp_servers_of(const run_command& run);

}  // namespace psych::cli
