#include "mcp_servers.hpp"

#include <map>
#include <optional>

#include <boost/hana/adapt_struct.hpp>
#include <fmt/format.h>

#include "files.hpp"
#include "psych/json_text.hpp"
#include "psych/protocol/json.hpp"

namespace psych::cli::mcp_file {

/// The file: only mcpServers is psych's; a client's own members beside it are not read.
struct config_file {
  std::map<std::string, json_text> mcpServers;
  static constexpr std::array<std::string_view, 1> required_members{"mcpServers"};
};

/// One server, as the MCP clients' format spells it.
struct server_entry {
  std::optional<std::string> type;
  std::string command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  static constexpr std::array<std::string_view, 1> required_members{"command"};
};

}  // namespace psych::cli::mcp_file

BOOST_HANA_ADAPT_STRUCT(psych::cli::mcp_file::config_file, mcpServers);
BOOST_HANA_ADAPT_STRUCT(psych::cli::mcp_file::server_entry, type, command, args, env);

namespace psych::cli {
namespace {

/// A config file is a person's: a megabyte is far beyond any list of servers.
constexpr protocol::json_bounds file_bounds{.max_bytes = 1u << 20, .max_depth = 16};

error in_file(const std::string& path, const error& e) {
  return error{e.kind, fmt::format("--mcp-config {}: {}", path, e.detail)};
}

error invalid(const std::string& path, std::string detail) {
  return error{error_kind::invalid_argument, fmt::format("--mcp-config {}: {}", path, detail)};
}

result<mcp_server_config> server_of(const std::string& path, const std::string& name, const json_text& entry) {
  const std::string member = "mcpServers." + name;
  if (name.empty()) return invalid(path, "mcpServers: a server's name is empty");
  if (name.find("__") != std::string::npos)
    return invalid(path, fmt::format("{}: the name cannot hold \"__\" (it separates server and tool)", member));
  // A server reached by URL (HTTP, SSE) is not one psych can start: say so before naming members.
  if (auto as_remote = protocol::decode_json<std::map<std::string, json_text>>(entry.text, file_bounds);
      as_remote && as_remote.value().contains("url"))
    return invalid(path, fmt::format("{}: psych starts stdio servers (command, args, env); a server reached by url "
                                     "is not supported",
                                     member));
  auto decoded = protocol::decode_json_strict<mcp_file::server_entry>(entry.text, file_bounds);
  if (!decoded) return in_file(path, error{decoded.error().kind, member + "." + decoded.error().detail});
  auto& server = decoded.value();
  if (server.type && *server.type != "stdio")
    return invalid(path, fmt::format("{}.type: psych starts stdio servers only, got '{}'", member, *server.type));
  if (server.command.empty()) return invalid(path, member + ".command: empty");
  std::vector<std::string> argv{std::move(server.command)};
  argv.insert(argv.end(), std::make_move_iterator(server.args.begin()), std::make_move_iterator(server.args.end()));
  return mcp_server_config{.name = name, .command = std::move(argv), .environment = std::move(server.env)};
}

}  // namespace

result<std::vector<mcp_server_config>> load_mcp_config(const std::string& path) {
  auto text = read_whole_file(path);
  if (!text) return error{text.error().kind, "--mcp-config " + text.error().detail};
  auto parsed = protocol::decode_json<mcp_file::config_file>(text.value(), file_bounds);
  if (!parsed) return in_file(path, parsed.error());
  std::vector<mcp_server_config> servers;
  for (const auto& [name, entry] : parsed.value().mcpServers) {
    PSYCH_TRY(auto server, server_of(path, name, entry));
    servers.push_back(std::move(server));
  }
  return servers;
}

result<std::vector<mcp_server_config>> mcp_servers_of(const run_command& run) {
  std::vector<mcp_server_config> servers;
  if (!run.mcp_config_path.empty()) {
    PSYCH_TRY(auto listed, load_mcp_config(run.mcp_config_path));
    servers = std::move(listed);
  }
  for (const auto& [name, argv] : run.mcp_servers) servers.push_back({.name = name, .command = argv});
  return servers;
}

}  // namespace psych::cli
