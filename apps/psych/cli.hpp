#pragma once
// The psych command line: parsing only (no I/O), so that every usage error
// is a named value a test can check. The options are declared once, in
// cli.cpp, and the help text is generated from that declaration.
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "psych/core.hpp"

namespace psych::cli {

/// --remote and what goes with it: the program runs on a sandbox service (docs/remote-protocol.md).
struct remote_choice {
  std::string url;            ///< empty: a local backend
  std::string ca_file;        ///< empty: the system's trust store
  std::string token_command;  ///< run with /bin/sh for each request; its output is the bearer token
  bool allow_insecure_http = false;
  /// --connect-seconds: the connect budget for describing the service (every attempt), and in
  /// psych run for each --mcp server's start-up. Unset: theirs (10 s, 30 s).
  std::optional<double> connect_seconds;
};

/// The binding sources reached over HTTP, which psych-remote starts (psych hands the command over):
/// MCP servers over Streamable HTTP, A2A peers, HTTP tools (docs/http-sources.md).
struct http_sources_choice {
  std::vector<std::pair<std::string, std::string>> mcp_http;  ///< --mcp-http NAME=URL
  std::vector<std::pair<std::string, std::string>> a2a;       ///< --a2a NAME=URL
  std::vector<std::string> http_tools_files;                  ///< --http-tools FILE
  /// --token-command-for NAME=COMMAND: the credential of the --mcp-http server or --a2a peer NAME,
  /// printed by COMMAND (run with /bin/sh for every request).
  std::vector<std::pair<std::string, std::string>> token_commands;
  [[nodiscard]] bool any() const { return !mcp_http.empty() || !a2a.empty() || !http_tools_files.empty(); }
};

struct run_command {
  bool json = false;
  /// --stream / --no-stream: the output printed as it arrives. Neither: only when standard output
  /// is a terminal and the report is the readable one.
  bool stream = false, no_stream = false;
  isolation_level isolation = isolation_level::process;
  code_execution_limits limits;
  /// --allow-host: network=allowlist with these host patterns (canonical); empty: no network.
  std::vector<std::string> allowed_hosts;
  std::string program_path;  ///< "-" for standard input
  bool allow_same_uid = false;
  std::string config_path;  ///< empty: none
  std::string backend;      ///< empty: the strongest local backend that reaches `isolation`
  std::string image;              ///< --backend container: the local image (default in container_sandbox_options)
  std::string container_runtime;  ///< --backend container: podman or docker (default: podman, then docker)
  output_policy output;
  bool collect_artifacts = false;
  std::string blob_dir;  ///< empty: no BlobStore (previews only)
  std::string tenant = "default";
  /// --mcp NAME=COMMAND: MCP servers over stdio whose tools the program may call as NAME__tool.
  std::vector<std::pair<std::string, std::vector<std::string>>> mcp_servers;
  /// --mcp-config FILE: more servers, in the MCP clients' {"mcpServers": {...}} format (mcp_servers.hpp).
  std::string mcp_config_path;
  http_sources_choice http_sources;
  remote_choice remote;
};

struct describe_command {
  bool json = false;
  bool allow_same_uid = false;
  std::string config_path;  ///< empty: none
  std::string backend;      ///< empty: the strongest local backend
  std::string image;
  std::string container_runtime;
  remote_choice remote;
};

/// `psych serve`: the reference sandbox service over one local backend (sandbox_service.hpp).
struct serve_command {
  std::string listen = "127.0.0.1:8443";
  std::string tls_cert, tls_key;
  std::string token_file;
  bool allow_insecure_http = false;
  std::vector<std::string> trusted_proxies;
  std::uint64_t max_concurrent = 4;
  std::uint64_t max_queued = 16;
  double drain_seconds = 30;
  bool allow_same_uid = false;
  std::string config_path;
  std::string backend;
  std::string image;
  std::string container_runtime;
};

/// `psych mcp`: psych as an MCP server whose one tool, run_code, runs programs that call the
/// upstream servers' tools (docs/mcp-server.md). Over stdio, or Streamable HTTP with --listen.
struct mcp_command {
  isolation_level isolation = isolation_level::process;
  code_execution_limits limits;
  std::vector<std::string> allowed_hosts;  ///< --allow-host, as psych run's: every program's allowlist
  output_policy output;
  bool allow_same_uid = false;
  std::string config_path;
  std::string backend, image, container_runtime;
  std::string blob_dir;     ///< empty: a private temporary directory, removed when psych mcp ends
  std::string run_log_dir;  ///< empty: each session's run log is in memory
  std::string tenant = "default";
  std::vector<std::pair<std::string, std::vector<std::string>>> mcp_servers;  ///< --mcp, as psych run's
  std::string mcp_config_path;
  http_sources_choice http_sources;
  std::optional<double> connect_seconds;  ///< each upstream server's start-up (default 30 s)
  std::uint64_t max_concurrent = 4;       ///< run_code calls at once per session
  std::uint64_t pool = 2;                 ///< prepared sandboxes kept warm (local backends)
  std::optional<std::uint64_t> max_calls, max_session_calls;
  // Streamable HTTP (--listen), handed to psych-remote as psych serve is.
  std::string listen;  ///< empty: stdio
  std::string tls_cert, tls_key;
  std::string token_file;
  bool allow_insecure_http = false;
  std::uint64_t max_sessions = 64;
};

struct help_command {
  std::string text;
};

using command = std::variant<run_command, describe_command, serve_command, mcp_command, help_command>;

/// args excludes argv[0]; `--opt value` and `--opt=value` are the same. A value
/// given twice keeps the last; --mcp is the one option that is repeated. Errors
/// are invalid_limit (a limit that is zero, negative or not finite) or
/// invalid_argument (anything else), each naming the option and what it got.
/// --mcp, --mcp-http, --a2a, --http-tools, --token-command-for and --allow-host are repeated.
result<command> parse(std::span<const std::string_view> args);

/// serve, mcp with --listen, run or describe with --remote, and run or mcp with a binding source
/// over HTTP named by a flag: the commands that need TLS and HTTP, which psych hands to psych-remote
/// (remote_commands.hpp). One whose --mcp-config names such a source is handed over too, once the
/// file is read (mcp_servers.hpp, config_reaches_http).
bool needs_remote(const command& parsed);

}  // namespace psych::cli
