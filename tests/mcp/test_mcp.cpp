// The MCP client and binding source (include/psych/host/mcp.hpp) against real MCP servers from npm
// (@modelcontextprotocol/server-everything and server-filesystem, installed by
// scripts/install-mcp-servers) and against a fake server in Python for what a well-behaved server
// never does: never answer, answer garbage, die mid-call, page its tool list, ask the client things.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include <rapidjson/document.h>

#include "text.hpp"
#include "psych/host/mcp.hpp"
#include "skip.hpp"
#include "temp_dir.hpp"

using namespace psych;
using namespace std::chrono_literals;

using psych::testing::contains;

namespace {

const std::string mcp_prefix = PSYCH_MCP_PREFIX;
const std::string everything_bin = mcp_prefix + "/node_modules/.bin/mcp-server-everything";
const std::string filesystem_bin = mcp_prefix + "/node_modules/.bin/mcp-server-filesystem";

/// True when the npm servers are installed. Otherwise the test fails, saying how to install them,
/// or, under PSYCH_SKIP_MCP=1, is skipped with a message that says why.
bool npm_servers_ready(std::source_location where = std::source_location::current()) {
  if (::access(everything_bin.c_str(), X_OK) == 0 && ::access(filesystem_bin.c_str(), X_OK) == 0) return true;
  const char* skip = std::getenv("PSYCH_SKIP_MCP");
  if (skip != nullptr && std::string_view{skip} == "1") {
    psych::testing::skip_case("the MCP servers are not installed in " + mcp_prefix + " and PSYCH_SKIP_MCP=1", where);
    return false;
  }
  FAIL_CHECK("the MCP servers are not installed in " << mcp_prefix << ": run " << PSYCH_MCP_INSTALL_SCRIPT << " "
                                                      << mcp_prefix << " (or set PSYCH_SKIP_MCP=1 to skip these tests)");
  return false;
}

/// No child of this process is left, running or waiting to be reaped.
void check_no_children() {
  errno = 0;
  const pid_t waited = ::waitpid(-1, nullptr, WNOHANG);
  const int why_not = errno;  // before doctest's reporting can touch errno
  CHECK(waited == -1);
  CHECK(why_not == ECHILD);
}

/// Nothing left behind: the server and its process group are gone, and no other child either.
void check_gone(pid_t pid) {
  REQUIRE(pid > 0);
  errno = 0;
  const int process = ::kill(pid, 0);
  const int process_errno = errno;
  errno = 0;
  const int group = ::killpg(pid, 0);
  const int group_errno = errno;
  CHECK(process == -1);
  CHECK(process_errno == ESRCH);
  CHECK(group == -1);
  CHECK(group_errno == ESRCH);
  check_no_children();
}

/// Why a result failed, for a message that doctest may print even on success (-s).
template <class R>
std::string why(const R& r) {
  return r ? std::string{} : r.error().message();
}

mcp_server_config everything_config(std::chrono::milliseconds timeout = 10s) {
  return {.name = "everything", .command = {everything_bin, "stdio"}, .environment = {}, .timeout = timeout};
}

std::unique_ptr<mcp_client> start(const mcp_server_config& config) {
  auto client = mcp_client::start(config);
  if (!client) FAIL("starting " << config.name << ": " << why(client));
  return std::move(client).value();
}

/// A server written in Python that misbehaves on demand, by tool name. Its tool list comes in two
/// pages; its protocol version is an older one than the client asks for.
constexpr std::string_view fake_server_source = R"PY(
import json, sys, time
cancelled = []
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
def text(id, s, error=False):
    send({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": s}], "isError": error}})
pages = {None: (["list-repos", "sleep"], "page-2"),
         "page-2": (["rpc-error", "garbage", "ping-me", "last-cancelled", "fails", "flood", "deaf-flood"], None)}
while True:
    line = sys.stdin.readline()
    if not line:
        break
    msg = json.loads(line)
    method, id, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if method == "notifications/cancelled":
        cancelled.append(params)
        continue
    if id is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "2024-11-05", "capabilities": {"tools": {}},
                                                     "serverInfo": {"name": "fake", "version": "1"}}})
    elif method == "tools/list":
        names, cursor = pages[params.get("cursor")]
        result = {"tools": [{"name": n, "description": "fake " + n,
                             "inputSchema": {"type": "object", "properties": {}}} for n in names]}
        if cursor:
            result["nextCursor"] = cursor
        send({"jsonrpc": "2.0", "id": id, "result": result})
    elif method == "tools/call":
        name, args = params["name"], params.get("arguments", {})
        if name == "list-repos":
            text(id, json.dumps(args))
        elif name == "sleep":
            pass  # never answers
        elif name == "rpc-error":
            send({"jsonrpc": "2.0", "id": id, "error": {"code": -32001, "message": "no such repo"}})
        elif name == "fails":
            text(id, "the repo is on fire", error=True)
        elif name == "garbage":
            print("this is not JSON", flush=True)
            sys.exit(3)
        elif name == "ping-me":
            send({"jsonrpc": "2.0", "id": "s1", "method": "ping"})
            first = json.loads(sys.stdin.readline())
            send({"jsonrpc": "2.0", "id": "s2", "method": "sampling/createMessage", "params": {}})
            second = json.loads(sys.stdin.readline())
            text(id, json.dumps([first, second]))
        elif name == "flood":
            # Pings without reading the answers, a pause with stdin unread, then a lot more output:
            # a client that answers on its reading side stops reading when the stdin pipe fills,
            # and this server then blocks writing, with the client blocked writing to it.
            n = args["pings"]
            for i in range(n):
                sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": "f%d" % i, "method": "ping"}) + "\n")
            sys.stdout.flush()
            time.sleep(args["pause"])
            noise = "x" * 65536
            for _ in range(args["noise_kib"] // 64):
                send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": noise}})
            answered = 0
            while answered < n:
                reply = json.loads(sys.stdin.readline())
                if reply.get("id") != "f%d" % answered or reply.get("result") != {}:
                    break
                answered += 1
            text(id, json.dumps({"answered": answered}))
        elif name == "deaf-flood":
            # Pings for ever and never reads another line.
            while True:
                sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}) + "\n")
        elif name == "last-cancelled":
            text(id, json.dumps(cancelled[-1] if cancelled else None))
        else:
            send({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": "Tool " + name + " not found"}})
    else:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}})
)PY";

struct fake_server {
  testing::temp_dir dir{"psych-mcp"};
  std::string script = dir.file("fake_server.py");

  fake_server() {
    std::ofstream out{script};
    out << fake_server_source;
    REQUIRE(out.good());
  }
  [[nodiscard]] mcp_server_config config(std::string name = "fake", std::chrono::milliseconds timeout = 5s) const {
    return {.name = std::move(name), .command = {"python3", script}, .environment = {}, .timeout = timeout};
  }
};

/// The text of the first content item of a tools/call result.
std::string first_text(std::string_view result_json) {
  rapidjson::Document d;
  d.Parse(result_json.data(), result_json.size());
  REQUIRE_FALSE(d.HasParseError());
  REQUIRE(d.IsObject());
  REQUIRE(d.HasMember("content"));
  const auto& content = d["content"];
  REQUIRE(content.IsArray());
  REQUIRE(content.Size() >= 1);
  REQUIRE(content[0].HasMember("text"));
  return content[0]["text"].GetString();
}

/// Invokes through the port and waits for `done` (at most 10 s).
tool_outcome invoke_and_wait(tool_invoker& invoker, std::string_view tool, std::string_view arguments,
                             std::stop_token stop = {}) {
  auto promise = std::make_shared<std::promise<tool_outcome>>();
  auto answer = promise->get_future();
  const std::string call_id = "c1";
  invoker.invoke({.call_id = call_id, .execution_id = "e1", .tool = tool, .arguments_json = arguments}, stop,
                 [promise](tool_outcome outcome) { promise->set_value(std::move(outcome)); });
  REQUIRE(answer.wait_for(10s) == std::future_status::ready);
  return answer.get();
}

template <class F>
std::chrono::milliseconds timed(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
}

}  // namespace

TEST_CASE("server-everything: initialize, then every tool listed, with its schema") {
  if (!npm_servers_ready()) return;
  pid_t pid = -1;
  {
    auto client = start(everything_config());
    pid = client->pid();
    CHECK(client->name() == "everything");
    CHECK(client->protocol_version() == "2025-06-18");
    CHECK(client->usable());
    auto tools = client->list_tools();  // one page: the cursor loop ends on the first
    REQUIRE_MESSAGE(tools, why(tools));
    std::set<std::string> names;
    for (const mcp_tool& t : tools.value()) {
      CAPTURE(t.name);
      names.insert(t.name);
      CHECK(t.input_schema_json.front() == '{');
    }
    CHECK(names.size() == tools.value().size());
    for (const char* expected : {"echo", "get-env", "get-sum", "trigger-long-running-operation"}) {
      CAPTURE(expected);
      CHECK(names.contains(expected));
    }
    const auto echo = std::find_if(tools.value().begin(), tools.value().end(), [](auto& t) { return t.name == "echo"; });
    CHECK(echo->description == "Echoes back the input string");
    CHECK(contains(echo->input_schema_json, R"("message")"));
  }
  check_gone(pid);
}

TEST_CASE("server-everything: a call's answer comes back whole, and the tool's own error is tool_failed") {
  if (!npm_servers_ready()) return;
  pid_t pid = -1;
  {
    auto client = start(everything_config());
    pid = client->pid();
    SUBCASE("echo, with quotes and non-ASCII") {
      auto echoed = client->call_tool("echo", R"({"message":"h\u00e9llo \"psych\""})", {});
      REQUIRE_MESSAGE(echoed, why(echoed));
      CHECK(first_text(echoed.value().json) == "Echo: h\xC3\xA9llo \"psych\"");
      auto sum = client->call_tool("get-sum", R"({"a": 2, "b": 40})", {});
      REQUIRE_MESSAGE(sum, why(sum));
      CHECK(contains(first_text(sum.value().json), "42"));
    }
    SUBCASE("a tool that does not exist") {
      auto missing = client->call_tool("no-such-tool", "{}", {});
      REQUIRE_FALSE(missing);
      CHECK(missing.error().kind == mcp_error_kind::tool_failed);
      CHECK(contains(missing.error().detail, "no-such-tool"));
      CHECK(client->usable());
    }
    SUBCASE("arguments that are not one JSON object are refused before anything is sent") {
      for (const char* bad : {"[1]", "\"text\"", "{", "{} {}", ""}) {
        CAPTURE(bad);
        auto refused = client->call_tool("echo", bad, {});
        REQUIRE_FALSE(refused);
        CHECK(refused.error().kind == mcp_error_kind::invalid_arguments);
      }
      CHECK(client->call_tool("echo", R"({"message":"still here"})", {}));
    }
  }
  check_gone(pid);
}

TEST_CASE("server-everything: the server's environment is the few safe variables plus the configured ones") {
  if (!npm_servers_ready()) return;
  ::setenv("PSYCH_MCP_HOST_SECRET", "hunter2", 1);
  auto config = everything_config();
  config.environment = {{"PSYCH_MCP_GIVEN", "forty-two"}};
  pid_t pid = -1;
  {
    auto client = start(config);
    pid = client->pid();
    auto env = client->call_tool("get-env", "{}", {});
    REQUIRE_MESSAGE(env, why(env));
    const std::string text = first_text(env.value().json);
    CHECK(contains(text, "PSYCH_MCP_GIVEN"));
    CHECK(contains(text, "forty-two"));
    CHECK(contains(text, "PATH"));
    CHECK_FALSE(contains(text, "hunter2"));
  }
  ::unsetenv("PSYCH_MCP_HOST_SECRET");
  check_gone(pid);
}

TEST_CASE("a call past its time limit is a timeout; it is abandoned and the client stays usable") {
  SUBCASE("server-everything's long-running operation") {
    if (!npm_servers_ready()) return;
    pid_t pid = -1;
    {
      auto client = start(everything_config());
      pid = client->pid();
      std::optional<mcp_result<mcp_call_result>> slow;
      const auto waited = timed([&] {
        slow.emplace(client->call_tool("trigger-long-running-operation", R"({"duration": 5, "steps": 1})", {}, 300ms));
      });
      REQUIRE_FALSE(*slow);
      CHECK(slow->error().kind == mcp_error_kind::timeout);
      CHECK(waited < 2s);
      CHECK(client->usable());
      auto echoed = client->call_tool("echo", R"({"message":"after"})", {});
      REQUIRE_MESSAGE(echoed, why(echoed));
      CHECK(first_text(echoed.value().json) == "Echo: after");
      // The server would work on for 5 s; closing ends it (stdin, then SIGTERM) well before.
      const auto closing = timed([&] { client.reset(); });
      CHECK(closing < 4s);
    }
    check_gone(pid);
  }
  SUBCASE("a server that never answers is told the request was cancelled") {
    fake_server fake;
    pid_t pid = -1;
    {
      auto client = start(fake.config());
      pid = client->pid();
      auto slow = client->call_tool("sleep", "{}", {}, 200ms);
      REQUIRE_FALSE(slow);
      CHECK(slow.error().kind == mcp_error_kind::timeout);
      auto told = client->call_tool("last-cancelled", "{}", {});
      REQUIRE_MESSAGE(told, why(told));
      rapidjson::Document d;
      d.Parse(first_text(told.value().json).c_str());
      REQUIRE(d.IsObject());
      CHECK(d["requestId"].IsInt64());
      CHECK(std::string_view{d["reason"].GetString()} == "timed out");
    }
    check_gone(pid);
  }
  SUBCASE("the caller's stop token abandons a call at once: cancelled") {
    fake_server fake;
    pid_t pid = -1;
    {
      auto client = start(fake.config("fake", 30s));
      pid = client->pid();
      std::stop_source stop;
      std::jthread stopper{[&] {
        std::this_thread::sleep_for(100ms);
        stop.request_stop();
      }};
      std::optional<mcp_result<mcp_call_result>> stopped;
      const auto waited = timed([&] { stopped.emplace(client->call_tool("sleep", "{}", stop.get_token())); });
      REQUIRE_FALSE(*stopped);
      CHECK(stopped->error().kind == mcp_error_kind::cancelled);
      CHECK(waited < 2s);
      auto told = client->call_tool("last-cancelled", "{}", {});
      REQUIRE_MESSAGE(told, why(told));
      CHECK(contains(first_text(told.value().json), "cancelled by the caller"));
    }
    check_gone(pid);
  }
}

TEST_CASE("a JSON-RPC error is rpc_error with its code; isError is tool_failed; the client goes on") {
  fake_server fake;
  pid_t pid = -1;
  {
    auto client = start(fake.config());
    pid = client->pid();
    CHECK(client->protocol_version() == "2024-11-05");  // the server's answer is accepted
    auto rpc = client->call_tool("rpc-error", "{}", {});
    REQUIRE_FALSE(rpc);
    CHECK(rpc.error().kind == mcp_error_kind::rpc_error);
    CHECK(rpc.error().rpc_code == -32001);
    CHECK(rpc.error().detail == "no such repo");
    auto failed = client->call_tool("fails", "{}", {});
    REQUIRE_FALSE(failed);
    CHECK(failed.error().kind == mcp_error_kind::tool_failed);
    CHECK(failed.error().detail == "the repo is on fire");
    CHECK(client->usable());
    CHECK(client->call_tool("list-repos", "{}", {}));
  }
  check_gone(pid);
}

TEST_CASE("the tool list follows nextCursor across pages") {
  fake_server fake;
  auto client = start(fake.config());
  auto tools = client->list_tools();
  REQUIRE_MESSAGE(tools, why(tools));
  std::vector<std::string> names;
  for (const mcp_tool& t : tools.value()) names.push_back(t.name);
  CHECK(names == std::vector<std::string>{"list-repos", "sleep", "rpc-error", "garbage", "ping-me", "last-cancelled",
                                          "fails", "flood", "deaf-flood"});
  CHECK(tools.value().front().description == "fake list-repos");
  CHECK(tools.value().front().input_schema_json == R"({"type": "object", "properties": {}})");
}

TEST_CASE("the server's own requests are answered: ping with {}, anything else with method not found") {
  fake_server fake;
  auto client = start(fake.config());
  auto answered = client->call_tool("ping-me", "{}", {});
  REQUIRE_MESSAGE(answered, why(answered));
  rapidjson::Document d;
  d.Parse(first_text(answered.value().json).c_str());
  REQUIRE(d.IsArray());
  CHECK(std::string_view{d[0]["id"].GetString()} == "s1");
  CHECK(d[0]["result"].IsObject());
  CHECK(d[0]["result"].ObjectEmpty());
  CHECK(std::string_view{d[1]["id"].GetString()} == "s2");
  CHECK(d[1]["error"]["code"].GetInt() == -32601);
}

TEST_CASE("answering the server never stops the client reading: a ping flood with stdin unread is answered whole") {
  // 50,000 pings are about 2.4 MB each way, far past both pipes' 64 KiB: the client must go on
  // reading the server's output while the server does not read the answers.
  fake_server fake;
  pid_t pid = -1;
  {
    auto client = start(fake.config("fake", 20s));
    pid = client->pid();
    std::optional<mcp_result<mcp_call_result>> flooded;
    const auto waited = timed([&] {
      flooded.emplace(client->call_tool("flood", R"({"pings": 50000, "pause": 1, "noise_kib": 2048})", {}));
    });
    REQUIRE_MESSAGE(*flooded, why(*flooded));
    CHECK(first_text(flooded->value().json) == R"({"answered": 50000})");
    MESSAGE("50,000 pings answered in " << waited.count() << " ms");
    CHECK(waited < 15s);  // well inside the 20 s time limit a blocked writer would have waited for
    CHECK(client->usable());
    CHECK(client->call_tool("list-repos", "{}", {}));
  }
  check_gone(pid);
}

TEST_CASE("a server that sends requests and never reads the answers breaks the client, with memory bounded") {
  fake_server fake;
  pid_t pid = -1;
  {
    auto client = start(fake.config("fake", 30s));
    pid = client->pid();
    std::optional<mcp_result<mcp_call_result>> flooded;
    const auto waited = timed([&] { flooded.emplace(client->call_tool("deaf-flood", "{}", {})); });
    REQUIRE_FALSE(*flooded);
    CHECK(flooded->error().kind == mcp_error_kind::protocol_violation);
    CHECK(contains(flooded->error().detail, "does not read"));
    CHECK(waited < 20s);
    CHECK_FALSE(client->usable());
  }
  check_gone(pid);
}

TEST_CASE("a server that writes garbage or dies is a named error at once, and the client is unusable after") {
  SUBCASE("garbage instead of the initialize answer, then exit") {
    std::optional<mcp_result<std::unique_ptr<mcp_client>>> started;
    const auto waited = timed([&] {
      started.emplace(mcp_client::start(
          {.name = "liar", .command = {"python3", "-c", "print('hello, I am not MCP'); import sys; sys.exit(3)"}}));
    });
    REQUIRE_FALSE(*started);
    const std::string message = started->error().message();
    CAPTURE(message);
    const auto kind = started->error().kind;
    CHECK((kind == mcp_error_kind::protocol_violation || kind == mcp_error_kind::server_exited));
    CHECK(contains(started->error().detail, "initialize"));
    CHECK(waited < 5s);
  }
  SUBCASE("an echo sends our own initialize back: a request where a response belongs, said so at once") {
    std::optional<mcp_result<std::unique_ptr<mcp_client>>> started;
    const auto waited = timed([&] { started.emplace(mcp_client::start({.name = "x", .command = {"/bin/cat"}})); });
    REQUIRE_FALSE(*started);
    CAPTURE(started->error().message());
    CHECK(started->error().kind == mcp_error_kind::protocol_violation);
    CHECK(contains(started->error().detail, "answered our initialize request with a request, not a response"));
    CHECK(waited < 5s);
  }
  SUBCASE("an exit without a word, its stderr in the message") {
    auto started = mcp_client::start(
        {.name = "quitter", .command = {"python3", "-c", "import sys; sys.stderr.write('no config file\\n'); sys.exit(2)"}});
    REQUIRE_FALSE(started);
    CHECK(started.error().kind == mcp_error_kind::server_exited);
    CHECK(contains(started.error().detail, "exited with status 2"));
    CHECK(contains(started.error().detail, "no config file"));
  }
  SUBCASE("a server that never answers initialize") {
    auto started = mcp_client::start(
        {.name = "mute", .command = {"python3", "-c", "import time; time.sleep(60)"}, .timeout = 300ms});
    REQUIRE_FALSE(started);
    CHECK(started.error().kind == mcp_error_kind::timeout);
  }
  SUBCASE("a server that never answers initialize is given up at start_timeout, whatever the requests' timeout") {
    std::optional<mcp_result<std::unique_ptr<mcp_client>>> started;
    const auto waited = timed([&] {
      started.emplace(mcp_client::start({.name = "mute",
                                         .command = {"python3", "-c", "import time; time.sleep(60)"},
                                         .timeout = 60s,
                                         .start_timeout = 300ms}));
    });
    REQUIRE_FALSE(*started);
    CHECK(started->error().kind == mcp_error_kind::timeout);
    CHECK(contains(started->error().detail, "initialize"));
    // The budget, then the stop of a server that ignores its stdin closing (1 s, SIGTERM).
    CHECK(waited < 5s);
  }
  SUBCASE("a start_timeout that is not positive is invalid_config, and nothing is started") {
    auto started = mcp_client::start({.name = "never", .command = {"python3"}, .start_timeout = 0ms});
    REQUIRE_FALSE(started);
    CHECK(started.error().kind == mcp_error_kind::invalid_config);
  }
  SUBCASE("a command that does not exist") {
    auto started = mcp_client::start({.name = "nothing", .command = {"/nonexistent/mcp-server"}});
    REQUIRE_FALSE(started);
    CHECK(started.error().kind == mcp_error_kind::spawn_failed);
    CHECK(contains(started.error().detail, "posix_spawnp"));
  }
  SUBCASE("garbage in the middle of a call") {
    fake_server fake;
    pid_t pid = -1;
    {
      auto client = start(fake.config());
      pid = client->pid();
      auto broken = client->call_tool("garbage", "{}", {});
      REQUIRE_FALSE(broken);
      CHECK(broken.error().kind == mcp_error_kind::protocol_violation);
      CHECK(contains(broken.error().detail, "this is not JSON"));
      CHECK_FALSE(client->usable());
      auto after = client->call_tool("list-repos", "{}", {});
      REQUIRE_FALSE(after);
      CHECK(after.error().kind == mcp_error_kind::unusable);
      CHECK_FALSE(client->list_tools());
    }
    check_gone(pid);
  }
  check_no_children();
}

TEST_CASE("server-filesystem: a directory listed through its tool, only inside its allowed root") {
  if (!npm_servers_ready()) return;
  testing::temp_dir root{"psych-mcp-root"};
  std::ofstream{root.file("a.txt")} << "hi\n";
  std::filesystem::create_directory(root.path() / "sub");
  pid_t pid = -1;
  {
    auto client = start({.name = "files", .command = {filesystem_bin, root.path().string()}, .environment = {},
                         .timeout = 10s});
    pid = client->pid();
    auto tools = client->list_tools();
    REQUIRE_MESSAGE(tools, why(tools));
    CHECK(std::any_of(tools.value().begin(), tools.value().end(), [](auto& t) { return t.name == "list_directory"; }));
    const std::string arguments = R"({"path":")" + root.path().string() + R"("})";
    auto listed = client->call_tool("list_directory", arguments, {});
    REQUIRE_MESSAGE(listed, why(listed));
    const std::string text = first_text(listed.value().json);
    CHECK(contains(text, "[FILE] a.txt"));
    CHECK(contains(text, "[DIR] sub"));
    auto outside = client->call_tool("list_directory", R"({"path":"/etc"})", {});
    REQUIRE_FALSE(outside);
    CHECK(outside.error().kind == mcp_error_kind::tool_failed);
    CHECK(contains(outside.error().detail, "Access denied"));
  }
  check_gone(pid);
}

TEST_CASE("mcp_binding_source: every server's tools as server__tool, invoked through the port") {
  if (!npm_servers_ready()) return;
  fake_server fake;
  pid_t everything_pid = -1, fake_pid = -1;
  {
    std::vector<std::unique_ptr<mcp_client>> clients;
    clients.push_back(start(everything_config()));
    clients.push_back(start(fake.config()));
    everything_pid = clients[0]->pid();
    fake_pid = clients[1]->pid();
    auto created = mcp_binding_source::create(std::move(clients));
    REQUIRE_MESSAGE(created, why(created));
    mcp_binding_source& source = *created.value();

    const auto offered = source.offered_now();
    std::set<std::string> names;
    for (const binding& b : offered) {
      names.insert(b.name);
      CHECK_FALSE(b.deferred);
      CHECK(b.origin == binding_origin::mcp);
    }
    for (const char* expected : {"everything__echo", "everything__get-env", "fake__list-repos", "fake__last-cancelled"}) {
      CAPTURE(expected);
      CHECK(names.contains(expected));
    }
    const auto echo = std::find_if(offered.begin(), offered.end(), [](auto& b) { return b.name == "everything__echo"; });
    REQUIRE(echo != offered.end());
    CHECK(echo->description == "Echoes back the input string");
    CHECK(contains(echo->input_schema_json, R"("message")"));
    CHECK(source.permit({.call_id = "c", .execution_id = "e", .tool = "everything__echo", .arguments_json = "{}"})
              .decision == call_permission::verdict::allowed);

    const auto echoed = invoke_and_wait(source, "everything__echo", R"({"message":"through the port"})");
    REQUIRE_MESSAGE(echoed.ok, echoed.message);
    CHECK(first_text(echoed.value_json) == "Echo: through the port");

    const auto repos = invoke_and_wait(source, "fake__list-repos", R"({"owner":"psych"})");
    REQUIRE_MESSAGE(repos.ok, repos.message);
    CHECK(first_text(repos.value_json) == R"({"owner": "psych"})");

    SUBCASE("the outcomes a program can branch on") {
      const auto nobody = invoke_and_wait(source, "nobody__echo", "{}");
      CHECK_FALSE(nobody.ok);
      CHECK(nobody.kind == tool_error_kind::unknown_tool);
      CHECK(invoke_and_wait(source, "echo", "{}").kind == tool_error_kind::unknown_tool);
      const auto rpc = invoke_and_wait(source, "fake__rpc-error", "{}");
      CHECK(rpc.kind == tool_error_kind::tool_failed);
      CHECK(rpc.message == "JSON-RPC error -32001: no such repo");
      const auto failed = invoke_and_wait(source, "fake__fails", "{}");
      CHECK(failed.kind == tool_error_kind::tool_failed);
      CHECK(failed.message == "the repo is on fire");
      CHECK(invoke_and_wait(source, "everything__no-such-tool", "{}").kind == tool_error_kind::tool_failed);
      CHECK(invoke_and_wait(source, "everything__echo", "[]").kind == tool_error_kind::malformed_call);
      std::stop_source stopped;
      stopped.request_stop();
      CHECK(invoke_and_wait(source, "fake__sleep", "{}", stopped.get_token()).kind == tool_error_kind::cancelled);
    }
    SUBCASE("a server that breaks mid-call: unknown_outcome, then unavailable, then no longer offered") {
      const auto broken = invoke_and_wait(source, "fake__garbage", "{}");
      CHECK(broken.kind == tool_error_kind::unknown_outcome);
      const auto after = invoke_and_wait(source, "fake__list-repos", "{}");
      CHECK(after.kind == tool_error_kind::unavailable_binding);
      const auto now = source.offered_now();
      CHECK(std::none_of(now.begin(), now.end(), [](auto& b) { return b.name.starts_with("fake__"); }));
      CHECK(std::any_of(now.begin(), now.end(), [](auto& b) { return b.name == "everything__echo"; }));
    }
  }
  check_gone(everything_pid);
  check_gone(fake_pid);
}

TEST_CASE("mcp_binding_source: a server name is non-empty, unique and free of \"__\"") {
  fake_server fake;
  const auto refused = [&](std::vector<std::string> names) {
    std::vector<std::unique_ptr<mcp_client>> clients;
    for (std::string& name : names) clients.push_back(start(fake.config(std::move(name))));
    auto created = mcp_binding_source::create(std::move(clients));
    REQUIRE_FALSE(created);
    CHECK(created.error().kind == mcp_error_kind::invalid_config);
    return created.error().detail;
  };
  CHECK(contains(refused({"docs__v2"}), "__"));
  CHECK(contains(refused({"docs", "docs"}), "two servers"));
  CHECK(contains(refused({""}), "empty"));
  check_no_children();
}
