// --mcp-config (apps/psych/mcp_servers.cpp): the MCP clients' {"mcpServers": ...} format, each
// server checked strictly, every error naming the file and the member.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "mcp_servers.hpp"
#include "temp_dir.hpp"

using namespace psych;

namespace {

struct config_file {
  psych::testing::temp_dir dir{"psych-mcp-config"};
  std::string path = dir.file("servers.json");
  explicit config_file(const std::string& text) { std::ofstream(path) << text; }
};

/// The error loading `text` gives, which must name the file.
std::string error_of(const std::string& text) {
  config_file file(text);
  const auto loaded = cli::load_mcp_config(file.path);
  REQUIRE_FALSE(loaded);
  const std::string message = loaded.error().message();
  CHECK_MESSAGE(message.find("--mcp-config " + file.path + ": ") != std::string::npos, message);
  return message;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("--mcp-config: command, args and env, as MCP clients write them") {
  config_file file(R"({"mcpServers": {
      "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv/my data"],
             "env": {"TOKEN": "t o k"}},
      "plain": {"type": "stdio", "command": "/usr/bin/srv"}},
    "globalShortcut": "Ctrl+Space"})");
  const auto loaded = cli::load_mcp_config(file.path);
  REQUIRE(loaded);
  const auto& servers = loaded.value();
  REQUIRE(servers.size() == 2);
  CHECK(servers[0].name == "fs");
  CHECK(servers[0].command ==
        std::vector<std::string>{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv/my data"});
  CHECK(servers[0].environment == std::map<std::string, std::string>{{"TOKEN", "t o k"}});
  CHECK(servers[1].name == "plain");
  CHECK(servers[1].command == std::vector<std::string>{"/usr/bin/srv"});
  CHECK(servers[1].environment.empty());
}

TEST_CASE("--mcp-config: what cannot be used is named by its member") {
  CHECK(has(error_of(R"({"servers": {}})"), "mcpServers: required member is missing"));
  CHECK(has(error_of(R"({"mcpServers": {"a": {"args": []}}})"), "mcpServers.a.command: required member is missing"));
  CHECK(has(error_of(R"({"mcpServers": {"a": {"command": "x", "argz": []}}})"),
            "mcpServers.a.argz: no such member (the members are: type, command, args, env)"));
  CHECK(has(error_of(R"({"mcpServers": {"a": {"command": "x", "args": "-v"}}})"), "mcpServers.a.args: expected"));
  CHECK(has(error_of(R"({"mcpServers": {"a": {"command": "x", "env": {"N": 1}}}})"), "mcpServers.a.env.N: expected"));
  CHECK(has(error_of(R"({"mcpServers": {"a": {"command": ""}}})"), "mcpServers.a.command: empty"));
  CHECK(has(error_of(R"({"mcpServers": {"a__b": {"command": "x"}}})"), "mcpServers.a__b: the name cannot hold"));
  CHECK(has(error_of(R"({"mcpServers": {"web": {"url": "https://example.invalid/mcp"}}})"),
            "mcpServers.web: psych starts stdio servers"));
  CHECK(has(error_of(R"({"mcpServers": {"web": {"type": "sse", "command": "x"}}})"),
            "mcpServers.web.type: psych starts stdio servers only, got 'sse'"));
  CHECK(has(error_of("{\"mcpServers\": "), "json_"));
  const auto missing = cli::load_mcp_config("/nonexistent/servers.json");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().kind == error_kind::unreadable_file);
  CHECK(has(missing.error().message(), "--mcp-config /nonexistent/servers.json"));
}

TEST_CASE("--mcp-config and --mcp together: the file's servers, then each --mcp") {
  config_file file(R"({"mcpServers": {"a": {"command": "srv-a"}}})");
  const std::vector<std::string_view> args{"run", "--mcp", "b=srv-b --flag", "--mcp-config", file.path, "p.py"};
  const auto parsed = cli::parse(args);
  REQUIRE(parsed);
  const auto servers = cli::mcp_servers_of(std::get<cli::run_command>(parsed.value()));
  REQUIRE(servers);
  REQUIRE(servers.value().size() == 2);
  CHECK(servers.value()[0].name == "a");
  CHECK(servers.value()[1].name == "b");
  CHECK(servers.value()[1].command == std::vector<std::string>{"srv-b", "--flag"});
}
