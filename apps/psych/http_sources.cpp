#include "http_sources.hpp"

#include <fmt/format.h>

#include "files.hpp"
#include "psych/host/a2a.hpp"
#include "psych/host/http_tools.hpp"
#include "psych/host/mcp_http_client.hpp"
#include "psych/host/secret_resolver.hpp"

namespace psych::cli {
namespace {

secret_resolver credential_of(const http_source_entry& source) {
  if (source.token_command.empty()) return {};
  return command_secret(source.token_command);
}

std::optional<std::string> ca_of(const http_source_entry& source) {
  if (source.ca_file.empty()) return std::nullopt;
  return source.ca_file;
}

result<void> start_mcp_http(const std::vector<http_source_entry>& servers,
                            std::optional<std::chrono::milliseconds> start_timeout, started_upstream& into) {
  if (servers.empty()) return success();
  std::vector<std::unique_ptr<mcp_client>> clients;
  for (const auto& server : servers) {
    mcp_server_config config{.name = server.name};
    config.url = server.url;
    config.token = credential_of(server);
    config.ca_file = ca_of(server);
    if (start_timeout) config.start_timeout = *start_timeout;
    auto client = start_mcp_http_client(config);
    if (!client)
      return fail_with(error_kind::invalid_argument, fmt::format("--mcp-http {}: {}", server.name, client.error().message()));
    clients.push_back(std::move(client).value());
  }
  auto source = mcp_binding_source::create(std::move(clients));
  if (!source) return fail_with(error_kind::invalid_argument, "--mcp-http: " + source.error().message());
  into.add(std::move(source).value(), "mcp-http");
  return success();
}

result<void> start_a2a(const std::vector<http_source_entry>& peers, std::optional<std::chrono::milliseconds> start_timeout,
                       started_upstream& into) {
  if (peers.empty()) return success();
  std::vector<a2a_peer_config> configs;
  for (const auto& peer : peers) {
    a2a_peer_config config{.name = peer.name, .url = peer.url};
    config.token = credential_of(peer);
    config.ca_file = ca_of(peer);
    if (start_timeout) config.start_timeout = *start_timeout;
    configs.push_back(std::move(config));
  }
  auto source = a2a_binding_source::create(std::move(configs));
  if (!source) return fail_with(error_kind::invalid_argument, "--a2a: " + source.error().message());
  // As an MCP server that does not start, a peer whose card cannot be read stops the command here.
  if (auto read = source.value()->read_cards(); !read)
    return fail_with(error_kind::invalid_argument, "--a2a " + read.error().detail);
  into.add(std::move(source).value(), "a2a");
  return success();
}

result<void> start_http_tools(const std::vector<std::string>& files, started_upstream& into) {
  if (files.empty()) return success();
  std::vector<http_tool> tools;
  for (const auto& file : files) {
    auto text = read_whole_file(file);
    if (!text) return error{text.error().kind, "--http-tools " + text.error().detail};
    auto declared = parse_http_tools(text.value());
    if (!declared)
      return fail_with(error_kind::invalid_argument, fmt::format("--http-tools {}: {}", file, declared.error().message()));
    for (auto& tool : declared.value()) tools.push_back(std::move(tool));
  }
  auto source = http_tool_source::create(std::move(tools));
  if (!source) return fail_with(error_kind::invalid_argument, "--http-tools: " + source.error().message());
  into.add(std::move(source).value(), "http-tools");
  return success();
}

}  // namespace

result<void> start_http_sources(const upstream_config& config, std::optional<std::chrono::milliseconds> start_timeout,
                                started_upstream& into) {
  PSYCH_TRY(start_mcp_http(config.mcp_http, start_timeout, into));
  PSYCH_TRY(start_a2a(config.a2a, start_timeout, into));
  PSYCH_TRY(start_http_tools(config.http_tools_files, into));
  return success();
}

}  // namespace psych::cli
