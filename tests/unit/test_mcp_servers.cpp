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
  const auto& servers = loaded.value().stdio_servers;
  REQUIRE(servers.size() == 2);
  CHECK_FALSE(loaded.value().reaches_http());
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
  CHECK(has(error_of(R"({"mcpServers": {"web": {"type": "sse", "url": "https://example.invalid/sse"}}})"),
            "mcpServers.web.type: psych reaches MCP servers over \"http\" (Streamable HTTP) or \"stdio\", got 'sse'"));
  CHECK(has(error_of(R"({"mcpServers": {"web": {"type": "sse", "command": "x"}}})"),
            "mcpServers.web.type: a server with a command is \"stdio\", got 'sse'"));
  CHECK(has(error_of(R"({"mcpServers": {"web": {"url": "https://x/mcp", "headers": {"Authorization": "Bearer s"}}}})"),
            "mcpServers.web.headers: psych sends no header written in a file"));
  CHECK(has(error_of(R"({"mcpServers": {"web": {"url": "https://x/mcp", "token": "s"}}})"),
            "mcpServers.web.token: no such member"));
  CHECK(has(error_of(R"({"mcpServers": {}, "a2aPeers": {"p": {"type": "http", "url": "https://x"}}})"),
            "a2aPeers.p.type: a peer has no type"));
  CHECK(has(error_of(R"({"mcpServers": {}, "a2aPeers": {"p__q": {"url": "https://x"}}})"), "the name cannot hold"));
  CHECK(has(error_of(R"({"mcpServers": {}, "httpTools": [""]})"), "httpTools: a path is empty"));
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
  const auto upstream = cli::upstream_of(std::get<cli::run_command>(parsed.value()));
  REQUIRE(upstream);
  const auto& servers = upstream.value().stdio_servers;
  REQUIRE(servers.size() == 2);
  CHECK(servers[0].name == "a");
  CHECK(servers[1].name == "b");
  CHECK(servers[1].command == std::vector<std::string>{"srv-b", "--flag"});
  CHECK_FALSE(cli::needs_remote(parsed.value()));
  CHECK_FALSE(cli::config_reaches_http(parsed.value()));
}

TEST_CASE("sources over HTTP, from the file and from flags, each with its token command") {
  config_file file(R"({"mcpServers": {"docs": {"type": "http", "url": "https://mcp.example.com/mcp",
                                                "tokenCommand": "pass docs", "ca": "/etc/ca.pem"},
                                       "local": {"command": "srv"}},
                       "a2aPeers": {"planner": {"url": "https://agents.example.com/planner"}},
                       "httpTools": ["tools.json", "/abs/more.json"]})");
  const std::vector<std::string_view> args{"run",          "--mcp-config",  file.path,
                                           "--mcp-http",   "web=http://127.0.0.1:9/mcp",
                                           "--a2a",        "helper=http://127.0.0.1:8",
                                           "--http-tools", "flag-tools.json",
                                           "--token-command-for", "planner=echo p",
                                           "--token-command-for", "web=echo w=x",
                                           "p.py"};
  const auto parsed = cli::parse(args);
  REQUIRE(parsed);
  CHECK(cli::needs_remote(parsed.value()));
  CHECK(cli::config_reaches_http(parsed.value()));
  const auto upstream = cli::upstream_of(std::get<cli::run_command>(parsed.value()));
  REQUIRE_MESSAGE(upstream, (upstream ? "" : upstream.error().message()));
  const auto& found = upstream.value();
  REQUIRE(found.stdio_servers.size() == 1);
  REQUIRE(found.mcp_http.size() == 2);
  CHECK(found.mcp_http[0].name == "docs");
  CHECK(found.mcp_http[0].token_command == "pass docs");
  CHECK(found.mcp_http[0].ca_file == "/etc/ca.pem");
  CHECK(found.mcp_http[1].name == "web");
  CHECK(found.mcp_http[1].url == "http://127.0.0.1:9/mcp");
  CHECK(found.mcp_http[1].token_command == "echo w=x");
  REQUIRE(found.a2a.size() == 2);
  CHECK(found.a2a[0].token_command == "echo p");
  CHECK(found.a2a[1].url == "http://127.0.0.1:8");
  REQUIRE(found.http_tools_files.size() == 3);
  CHECK(found.http_tools_files[0] == file.dir.file("tools.json"));
  CHECK(found.http_tools_files[1] == "/abs/more.json");
  CHECK(found.http_tools_files[2] == "flag-tools.json");

  // A file that reaches HTTP hands the command to psych-remote, flags or not.
  const std::vector<std::string_view> file_only{"mcp", "--mcp-config", file.path};
  const auto as_mcp = cli::parse(file_only);
  REQUIRE(as_mcp);
  CHECK_FALSE(cli::needs_remote(as_mcp.value()));
  CHECK(cli::config_reaches_http(as_mcp.value()));
}

TEST_CASE("--mcp-http, --a2a and --token-command-for refuse what cannot be used, by name") {
  const auto refusal = [](std::vector<std::string_view> args) {
    const auto parsed = cli::parse(args);
    if (!parsed) return parsed.error().message();
    const auto upstream = cli::upstream_of(std::get<cli::run_command>(parsed.value()));
    REQUIRE_FALSE(upstream);
    return upstream.error().message();
  };
  CHECK(has(refusal({"run", "--mcp-http", "nourl", "p.py"}), "--mcp-http expects NAME=URL, got 'nourl'"));
  CHECK(has(refusal({"run", "--a2a", "a__b=http://x", "p.py"}), "--a2a: the name 'a__b' cannot hold"));
  CHECK(has(refusal({"run", "--a2a", "p=", "p.py"}), "--a2a expects NAME=URL"));
  CHECK(has(refusal({"run", "--token-command-for", "ghost=echo x", "p.py"}),
            "--token-command-for ghost: no --mcp-http server or --a2a peer is named 'ghost'"));
}
