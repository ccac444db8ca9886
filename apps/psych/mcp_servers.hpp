#pragma once
// The binding sources `psych run` and `psych mcp` reach: each --mcp NAME=COMMAND (a server over
// stdio, started here), each --mcp-http NAME=URL, --a2a NAME=URL and --http-tools FILE (reached
// over HTTP by psych-remote), and those of an --mcp-config file in the format MCP clients already
// share, with psych's two members beside mcpServers:
//   {"mcpServers": {"fs": {"command": "npx", "args": ["-y", "server", "/my dir"], "env": {"K": "v"}},
//                   "docs": {"type": "http", "url": "https://mcp.example.com/mcp", "tokenCommand": "pass docs"}},
//    "a2aPeers": {"planner": {"url": "https://agents.example.com/planner", "tokenCommand": "..."}},
//    "httpTools": ["tools.json"]}
#include <string>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "psych/host/mcp.hpp"

namespace psych::cli {

/// A source reached over HTTP, as a flag or the file names it.
struct http_source_entry {
  std::string name;
  std::string url;
  std::string token_command;  ///< empty: no credential is sent
  std::string ca_file;        ///< empty: the system's trust store
};

/// Every source a command asked for.
struct upstream_config {
  std::vector<mcp_server_config> stdio_servers;
  std::vector<http_source_entry> mcp_http;
  std::vector<http_source_entry> a2a;
  std::vector<std::string> http_tools_files;  ///< a file's relative paths made relative to the file's folder

  [[nodiscard]] bool reaches_http() const { return !mcp_http.empty() || !a2a.empty() || !http_tools_files.empty(); }
};

/// The sources of the config file at `path`. Each entry is checked strictly (a stdio server:
/// command, args, env and an optional "type": "stdio"; one over HTTP: "type": "http" (or
/// "streamable-http"), url, tokenCommand, ca; a peer: url, tokenCommand, ca); anything else is an
/// error naming the file and the member. A client's own top-level members are left to it.
result<upstream_config> load_mcp_config(const std::string& path);

using named_commands = std::vector<std::pair<std::string, std::vector<std::string>>>;

/// Every source asked for: the config file's (none when `config_path` is empty), then each flag in
/// its order; --token-command-for sets the credential of the HTTP server or peer it names.
result<upstream_config> upstream_of(const named_commands& stdio_flags, const std::string& config_path,
                                    const http_sources_choice& http_flags);
result<upstream_config> upstream_of(const run_command& run);

/// Whether the command's config file names a source over HTTP, which psych hands to psych-remote.
/// A file that cannot be read says no: the command then fails on it with its own error.
bool config_reaches_http(const command& parsed);

}  // namespace psych::cli
