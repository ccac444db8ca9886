#pragma once
// The MCP servers `psych run` and `psych mcp` start: each --mcp NAME=COMMAND, and the servers of an --mcp-config
// file in the format MCP clients already share:
//   {"mcpServers": {"fs": {"command": "npx", "args": ["-y", "server", "/my dir"], "env": {"K": "v"}}}}
#include <string>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "psych/host/mcp.hpp"

namespace psych::cli {

/// The servers of the config file at `path`, in their names' order. Each entry is checked
/// strictly (command, args, env and an optional "type": "stdio"; anything else is an error naming
/// the file and the member); other top-level members are left to the client they belong to.
result<std::vector<mcp_server_config>> load_mcp_config(const std::string& path);

using named_commands = std::vector<std::pair<std::string, std::vector<std::string>>>;

/// Every server asked for: the config file's (none when `config_path` is empty), then each --mcp
/// in its order.
result<std::vector<mcp_server_config>> mcp_servers_of(const named_commands& flags, const std::string& config_path);
result<std::vector<mcp_server_config>> mcp_servers_of(const run_command& run);


}  // namespace psych::cli
