// MCP on Windows (src/host/mcp/mcp_client.cpp, json_rpc_peer.cpp on json_rpc_streams_windows.cpp): a
// server started with its stdin, stdout and stderr on overlapped pipes, the handshake, the tool
// list, calls, a call abandoned at its timeout and cancelled, and a server that exits named with its
// status and its last words. The server is this binary (`--child mcp-server`): a few tools, enough
// to drive each path, in place of the Node.js servers the Linux cases use.
#include <doctest/doctest.h>

#include <windows.h>

#include <chrono>
#include <set>
#include <string>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "parts.hpp"
#include "psych/host/mcp.hpp"

using namespace psych;
using psych::testing::windows_host::own_path;
using namespace std::chrono_literals;

namespace {

void write_out(HANDLE to, const std::string& text) {
  DWORD written = 0;
  ::WriteFile(to, text.data(), static_cast<DWORD>(text.size()), &written, nullptr);
}

std::string json_of(const rapidjson::Value& value) {
  rapidjson::StringBuffer text;
  rapidjson::Writer<rapidjson::StringBuffer> writer(text);
  value.Accept(writer);
  return text.GetString();
}

std::string answer(const rapidjson::Value& id, const std::string& result) {
  return R"({"jsonrpc":"2.0","id":)" + json_of(id) + R"(,"result":)" + result + "}\n";
}

std::string text_result(const std::string& text, bool is_error = false) {
  rapidjson::Value quoted(text.c_str(), static_cast<rapidjson::SizeType>(text.size()));
  return std::string(R"({"content":[{"type":"text","text":)") + json_of(quoted) + "}]" +
         (is_error ? R"(,"isError":true})" : "}");
}

}  // namespace

namespace psych::testing::windows_host {

/// The test server: newline-delimited JSON-RPC on its stdin and stdout. Tools: echo (answers its
/// "text" argument), fail (a tool error), slow (never answers), cancels (how many
/// notifications/cancelled arrived), exit (says goodbye on stderr and exits with status 7). It
/// exits 0 at the end of its input.
int mcp_server_main() {
  const HANDLE in = ::GetStdHandle(STD_INPUT_HANDLE), out = ::GetStdHandle(STD_OUTPUT_HANDLE);
  int cancelled = 0;
  std::string pending;
  char chunk[4096];
  DWORD got = 0;
  while (::ReadFile(in, chunk, sizeof chunk, &got, nullptr) && got > 0) {
    pending.append(chunk, got);
    for (auto end = pending.find('\n'); end != std::string::npos; end = pending.find('\n')) {
      const std::string line = pending.substr(0, end);
      pending.erase(0, end + 1);
      rapidjson::Document message;
      if (message.Parse(line.c_str()).HasParseError() || !message.IsObject() || !message.HasMember("method")) continue;
      const std::string method = message["method"].GetString();
      if (method == "notifications/cancelled") ++cancelled;
      if (!message.HasMember("id")) continue;
      const auto& id = message["id"];
      if (method == "initialize") {
        write_out(out, answer(id, R"({"protocolVersion":"2025-06-18","capabilities":{"tools":{}},)"
                                  R"("serverInfo":{"name":"windows-test","version":"1"}})"));
      } else if (method == "tools/list") {
        write_out(out, answer(id, R"({"tools":[{"name":"echo","inputSchema":{"type":"object"}},{"name":"fail"},)"
                                  R"({"name":"slow"},{"name":"cancels"},{"name":"exit"}]})"));
      } else if (method == "tools/call") {
        const auto& params = message["params"];
        const std::string tool = params["name"].GetString();
        if (tool == "echo") {
          const auto& arguments = params["arguments"];
          write_out(out, answer(id, text_result(arguments.HasMember("text") ? arguments["text"].GetString() : "")));
        } else if (tool == "fail") {
          write_out(out, answer(id, text_result("it failed", /*is_error=*/true)));
        } else if (tool == "cancels") {
          write_out(out, answer(id, text_result(std::to_string(cancelled))));
        } else if (tool == "exit") {
          write_out(::GetStdHandle(STD_ERROR_HANDLE), "bye from the server\n");
          return 7;
        }  // slow: no answer
      } else {
        write_out(out, R"({"jsonrpc":"2.0","id":)" + json_of(id) + R"(,"error":{"code":-32601,"message":"no"}})" + "\n");
      }
    }
  }
  return 0;
}

}  // namespace psych::testing::windows_host

namespace {

std::unique_ptr<mcp_client> start_test_server(std::chrono::milliseconds timeout = 10s) {
  auto client = mcp_client::start({.name = "win", .command = {own_path(), "--child", "mcp-server"}, .timeout = timeout});
  REQUIRE_MESSAGE(client, (client ? "" : client.error().message()));
  return std::move(client).value();
}

}  // namespace

TEST_CASE("MCP on Windows: the handshake, the tool list, calls and a tool's error, over overlapped pipes") {
  auto client = start_test_server();
  CHECK(client->protocol_version() == "2025-06-18");
  auto tools = client->list_tools();
  REQUIRE_MESSAGE(tools, (tools ? "" : tools.error().message()));
  std::set<std::string> names;
  for (const auto& tool : tools.value()) names.insert(tool.name);
  CHECK(names == std::set<std::string>{"echo", "fail", "slow", "cancels", "exit"});

  auto echoed = client->call_tool("echo", R"({"text":"hello from the host"})", {});
  REQUIRE_MESSAGE(echoed, (echoed ? "" : echoed.error().message()));
  CHECK(echoed.value().json.find("hello from the host") != std::string::npos);
  // A call larger than the pipe's 64 KiB buffer: the write goes out in more than one piece.
  const std::string big(200'000, 'b');
  auto large = client->call_tool("echo", R"({"text":")" + big + R"("})", {});
  REQUIRE_MESSAGE(large, (large ? "" : large.error().message()));
  CHECK(large.value().json.find(big) != std::string::npos);

  auto failed = client->call_tool("fail", "{}", {});
  REQUIRE_FALSE(failed);
  CHECK(failed.error().kind == mcp_error_kind::tool_failed);
  CHECK(failed.error().detail == "it failed");
  CHECK(client->usable());
}

TEST_CASE("MCP on Windows: a call past its timeout is abandoned and cancelled, and the session goes on") {
  auto client = start_test_server();
  const auto started = std::chrono::steady_clock::now();
  auto slow = client->call_tool("slow", "{}", {}, 300ms);
  CHECK(std::chrono::steady_clock::now() - started < 5s);
  REQUIRE_FALSE(slow);
  CHECK(slow.error().kind == mcp_error_kind::timeout);
  auto cancels = client->call_tool("cancels", "{}", {});
  REQUIRE_MESSAGE(cancels, (cancels ? "" : cancels.error().message()));
  CHECK(cancels.value().json.find(R"("text":"1")") != std::string::npos);  // notifications/cancelled arrived
}

TEST_CASE("MCP on Windows: a server that exits is named with its status and its last words") {
  auto client = start_test_server();
  auto gone = client->call_tool("exit", "{}", {});
  REQUIRE_FALSE(gone);
  CHECK(gone.error().kind == mcp_error_kind::server_exited);
  CAPTURE(gone.error().detail);
  CHECK(gone.error().detail.find("exited with status 7") != std::string::npos);
  CHECK(gone.error().detail.find("bye from the server") != std::string::npos);
  CHECK_FALSE(client->usable());
}
