// Host bindings from every kind of source (issue 36): a function tool, an MCP server over stdio, an
// MCP server over Streamable HTTP, an A2A peer and an HTTP tool, offered together (binding_sources)
// and reached by a program on every backend through the one path: the same gateway, permission,
// meters and ToolError kinds whatever the source. The peers are real: the npm SDKs' (installed by
// scripts/install-mcp-servers) and a loopback HTTP API.
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backends.hpp"
#include "psych/host/a2a.hpp"
#include "psych/host/binding_sources.hpp"
#include "psych/host/function_tools.hpp"
#include "psych/host/http_tools.hpp"
#include "psych/host/mcp.hpp"
#include "psych/host/mcp_http_client.hpp"
#include "mcp_http_peer.hpp"
#include "peer_process.hpp"
#include "scripted_server.hpp"

using namespace psych;
using conformance::for_each_backend;
using psych::testing::received_request;
using psych::testing::scripted_server;

namespace {

const std::string modules = PSYCH_MCP_MODULES;
const std::string source_dir = PSYCH_SOURCE_DIR;

/// The API behind the HTTP tools: GET /items/{id}, 404 elsewhere, POST /orders.
void api(const received_request& request, scripted_server::socket& s) {
  const std::string target = request.target();
  if (request.head.starts_with("GET /items/"))
    return scripted_server::respond(s, 200, fmt::format(R"({{"item":"{}"}})", target.substr(7)));
  if (request.head.starts_with("POST /orders")) return scripted_server::respond(s, 201, R"({"created":true})");
  scripted_server::respond(s, 404, "no such thing", "text/plain");
}

/// One source of each kind, and all of them as one catalogue and invoker.
struct every_source {
  std::unique_ptr<psych::testing::mcp_http_peer> mcp_peer;
  std::unique_ptr<psych::testing::peer_process> a2a_peer;
  std::unique_ptr<scripted_server> api_server;
  std::unique_ptr<function_tools> functions;
  std::unique_ptr<mcp_binding_source> stdio, mcp_http;
  std::unique_ptr<a2a_binding_source> a2a;
  std::unique_ptr<http_tool_source> http;
  std::unique_ptr<binding_sources> all;

  every_source() {
    REQUIRE_MESSAGE(std::filesystem::exists(modules + "/node_modules/@a2a-js/sdk"),
                    "the npm peers are not installed in " << modules << " (scripts/install-mcp-servers)");
    auto made = function_tools::create(
        {{.name = "fn_echo",
          .description = "echoes",
          .call = [](const json_text& arguments, std::stop_token) -> tool_answer<json_text> { return arguments; }},
         {.name = "fn_fail", .description = "fails", .call = [](const json_text&, std::stop_token) -> tool_answer<json_text> {
            return tool_failed("the function failed");
          }}});
    REQUIRE(made);
    functions = std::move(made).value();

    auto everything = mcp_client::start(
        {.name = "stdio", .command = {modules + "/node_modules/.bin/mcp-server-everything", "stdio"}});
    REQUIRE_MESSAGE(everything, (everything ? "" : everything.error().message()));
    std::vector<std::unique_ptr<mcp_client>> stdio_clients;
    stdio_clients.push_back(std::move(everything).value());
    stdio = std::move(mcp_binding_source::create(std::move(stdio_clients))).value();

    const std::string token = "conformance-token-2b7e";
    mcp_peer = std::make_unique<psych::testing::mcp_http_peer>(
        PSYCH_NODE, source_dir + "/tests/mcp_http_client/mcp_http_peers.cjs",
        std::vector<std::string>{"sdk", "--modules", modules, "--token", token});
    mcp_server_config web{.name = "web"};
    web.url = mcp_peer->url("/mcp");
    web.token = [token] { return result<std::string>(token); };
    auto web_client = start_mcp_http_client(web);
    REQUIRE_MESSAGE(web_client, (web_client ? "" : web_client.error().message()));
    std::vector<std::unique_ptr<mcp_client>> http_clients;
    http_clients.push_back(std::move(web_client).value());
    mcp_http = std::move(mcp_binding_source::create(std::move(http_clients))).value();

    a2a_peer = std::make_unique<psych::testing::peer_process>(source_dir + "/tests/a2a/sdk_peer.mjs",
                                                              std::vector<std::string>{"--modules", modules, "--token", token});
    a2a_peer_config peer{.name = "peer", .url = a2a_peer->url()};
    peer.token = [token] { return result<std::string>(token); };
    auto peers = a2a_binding_source::create({peer});
    REQUIRE_MESSAGE(peers, (peers ? "" : peers.error().message()));
    a2a = std::move(peers).value();

    api_server = std::make_unique<scripted_server>(api);
    std::vector<http_tool> tools(3);
    tools[0].name = "get_item";
    tools[0].url_template = api_server->url("/items/{id}");
    tools[0].input_schema_json = R"({"type":"object","properties":{"id":{"type":"string"}},"required":["id"]})";
    tools[1].name = "get_missing";
    tools[1].url_template = api_server->url("/missing");
    tools[2].name = "create_order";
    tools[2].method = "POST";
    tools[2].url_template = api_server->url("/orders");
    auto declared = http_tool_source::create(std::move(tools));
    REQUIRE_MESSAGE(declared, (declared ? "" : declared.error().message()));
    http = std::move(declared).value();

    all = std::make_unique<binding_sources>(std::vector<binding_source>{
        binding_source::of(*functions, "functions"), binding_source::of(*stdio, "mcp"),
        binding_source::of(*mcp_http, "mcp-http"), binding_source::of(*a2a, "a2a"), binding_source::of(*http, "http-tools")});
  }
};

constexpr const char* every_kind_program = R"PY(
import json
out = {"tools": [n for n in sorted(TOOLS) if n in ("fn_echo", "stdio__echo", "web__echo", "peer__echo", "get_item")]}
for name, arguments, expect in (("fn_echo", {"text": "k1"}, "k1"), ("stdio__echo", {"message": "k2"}, "k2"),
                                ("web__echo", {"text": "k3"}, "k3"), ("peer__echo", {"text": "k4"}, "k4"),
                                ("get_item", {"id": "k5"}, "k5")):
    out[name] = expect in json.dumps(await call_tool(name, arguments))
out["aliases"] = [n for n in ("fn_echo", "web__echo", "peer__echo", "get_item") if n in globals()]
for name in ("fn_fail", "web__fail", "peer__refuse", "get_missing", "create_order", "web__nope"):
    try:
        await call_tool(name, {})
        out[name] = "returned"
    except ToolError as error:
        out[name] = [error.kind, error.tool]
return out
)PY";

}  // namespace

TEST_CASE("bindings: a tool from every source kind goes the one path, with the same ToolError kinds") {
  every_source sources;
  const auto offered = sources.all->offered_now();
  REQUIRE_MESSAGE(sources.all->conflicts().empty(), fmt::format("{}", fmt::join(sources.all->conflicts(), "; ")));
  for_each_backend([&](sandbox& sb, const auto&) {
    const auto r = sb.run({.program = every_kind_program,
                           .terms = conformance::terms_for(sb),
                           .bindings = offered,
                           .invoker = sources.all.get()});
    REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
    const auto& v = r.value->text;
    INFO(v);
    CHECK(v.find(R"("tools":["fn_echo","get_item","peer__echo","stdio__echo","web__echo"])") != std::string::npos);
    for (const char* name : {"fn_echo", "stdio__echo", "web__echo", "peer__echo", "get_item"})
      CHECK(v.find(fmt::format(R"("{}":true)", name)) != std::string::npos);
    CHECK(v.find(R"("aliases":["fn_echo","web__echo","peer__echo","get_item"])") != std::string::npos);
    CHECK(v.find(R"("fn_fail":["tool_failed","fn_fail"])") != std::string::npos);
    CHECK(v.find(R"("web__fail":["tool_failed","web__fail"])") != std::string::npos);
    CHECK(v.find(R"("peer__refuse":["tool_failed","peer__refuse"])") != std::string::npos);
    CHECK(v.find(R"("get_missing":["http_error","get_missing"])") != std::string::npos);
    CHECK(v.find(R"("create_order":["approval_required_in_program","create_order"])") != std::string::npos);
    CHECK(v.find(R"("web__nope":["unknown_tool","web__nope"])") != std::string::npos);

    // One meter for every source: three calls, whoever answers them.
    const auto metered = sb.run({.program = R"PY(
out = []
for name, arguments in (("fn_echo", {}), ("web__echo", {"text": "a"}), ("peer__echo", {"text": "b"}),
                        ("get_item", {"id": "c"}), ("stdio__echo", {"message": "d"})):
    try:
        await call_tool(name, arguments)
        out.append("ok")
    except ToolError as error:
        out.append(error.kind)
return out
)PY",
                                 .terms = conformance::terms_for(sb),
                                 .bindings = offered,
                                 .invoker = sources.all.get(),
                                 .budget = {.max_calls = 3}});
    REQUIRE_MESSAGE(metered.ok(), (metered.failure ? metered.failure->message : ""));
    CHECK(metered.value->text == R"(["ok","ok","ok","budget_exhausted","budget_exhausted"])");
  });
  // No order was ever created: the POST was refused before anything was sent.
  for (const auto& request : sources.api_server->requests()) CHECK_FALSE(request.head.starts_with("POST"));
}
