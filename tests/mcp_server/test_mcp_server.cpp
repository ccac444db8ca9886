// psych mcp's session (include/psych/host/mcp_server.hpp) driven message by message, with a real
// local sandbox and function tools as the upstream catalogue; and its stdio transport over pipes.
// The official client's view is tests/mcp_server/sdk_client.cjs.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <rapidjson/document.h>

#include "psych/host/blob_store.hpp"
#include "psych/host/function_tools.hpp"
#include "psych/host/mcp_server.hpp"
#include "psych/host/sandbox.hpp"
#include "psych/protocol/json.hpp"
#include "skip.hpp"
#include "temp_dir.hpp"

namespace {

using psych::testing::temp_dir;
using clock_type = std::chrono::steady_clock;

/// What a session sent, in order, for every message handed to it.
struct inbox {
  std::mutex mutex;
  std::condition_variable arrived;
  std::vector<std::string> messages;

  psych::mcp_send sink() {
    return [this](psych::mcp_outgoing out) {
      std::lock_guard lock(mutex);
      messages.push_back(std::move(out.json));
      arrived.notify_all();
    };
  }

  /// The answer to request `id` (its JSON text), waiting up to `within`; empty if none came.
  std::string answer_to(std::string_view id, std::chrono::milliseconds within = std::chrono::seconds(30)) {
    std::unique_lock lock(mutex);
    std::string found;
    arrived.wait_for(lock, within, [&] {
      for (const auto& m : messages)
        if (m.find(fmt::format(R"("id":{},)", id)) != std::string::npos) {
          found = m;
          return true;
        }
      return false;
    });
    return found;
  }

  std::vector<std::string> snapshot() {
    std::lock_guard lock(mutex);
    return messages;
  }
};

rapidjson::Document parsed(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.data(), text.size());
  REQUIRE_MESSAGE(!d.HasParseError(), text);
  return d;
}

/// The structuredContent of a tools/call answer, as JSON text, and whether it is an error.
struct call_answer {
  bool is_error = false;
  rapidjson::Document payload;
};

call_answer payload_of(const std::string& answer) {
  auto d = parsed(answer);
  REQUIRE_MESSAGE(d.HasMember("result"), answer);
  const auto& result = d["result"];
  call_answer out;
  out.is_error = result["isError"].GetBool();
  const auto& text = result["content"][0]["text"];
  out.payload.Parse(text.GetString(), text.GetStringLength());
  REQUIRE(!out.payload.HasParseError());
  return out;
}

std::unique_ptr<psych::sandbox> process_sandbox(const std::string& temp_root) {
  psych::local_sandbox_options options;
  options.backend = "linux-process";
  options.temp_root = temp_root;
  options.allow_same_uid = ::geteuid() != 0;
  auto made = psych::local_sandbox(options);
  REQUIRE_MESSAGE(made.has_value(), (made ? "" : made.error().message()));
  return std::move(made).value();
}

/// A server over the process backend, with one function tool (`count`, which counts its calls)
/// and a BlobStore.
struct fixture {
  temp_dir dir{"psych-mcp-server", 0711};
  std::unique_ptr<psych::sandbox> backend = process_sandbox(dir.path().string());
  std::atomic<int> calls{0};
  std::unique_ptr<psych::function_tools> tools;
  std::unique_ptr<psych::directory_blob_store> blobs;
  psych::mcp_server_options options;

  fixture() {
    psych::function_tool count{.name = "count",
                               .description = "Counts its calls. Returns the count so far.",
                               .call = [this](const psych::json_text&, std::stop_token) -> psych::tool_answer<psych::json_text> {
                                 return psych::json_text{std::to_string(++calls)};
                               }};
    auto made = psych::function_tools::create({count});
    REQUIRE(made.has_value());
    tools = std::move(made).value();
    auto store = psych::open_directory_blob_store((dir.path() / "blobs").string());
    REQUIRE(store.has_value());
    blobs = std::move(store).value();
    options.backend = backend.get();
    options.catalogue = tools.get();
    options.invoker = tools.get();
    options.blobs = blobs.get();
    options.server_version = "test";
  }

  std::unique_ptr<psych::mcp_server_session> session(std::string_view version = "2025-11-25") {
    auto opened = psych::mcp_server_session::open(options, "test");
    REQUIRE(opened.has_value());
    inbox replies;
    opened.value()->receive(
        fmt::format(R"({{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{}","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}})",
                    version),
        replies.sink());
    REQUIRE(!replies.answer_to("0").empty());
    return std::move(opened).value();
  }
};

/// A tools/call of run_code; `arguments` and `params` are more members of each, with a leading comma.
std::string run_code_call(int id, std::string_view program, std::string_view arguments = "", std::string_view params = "") {
  return fmt::format(R"({{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"run_code","arguments":{{"program":{}{}}}{}}}}})",
                     id, psych::protocol::encode_json(std::string(program)), arguments, params);
}

}  // namespace

TEST_CASE("psych mcp: initialize settles on a version psych speaks, and nothing but ping comes before it") {
  fixture f;
  auto opened = psych::mcp_server_session::open(f.options, "s");
  REQUIRE(opened.has_value());
  auto& session = *opened.value();
  inbox replies;
  session.receive(R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})", replies.sink());
  CHECK(replies.answer_to("1").find("initialize first") != std::string::npos);
  session.receive(R"({"jsonrpc":"2.0","id":2,"method":"ping"})", replies.sink());
  CHECK(replies.answer_to("2").find(R"("result":{})") != std::string::npos);
  for (const auto& [asked, settled] : {std::pair{"2025-06-18", "2025-06-18"}, std::pair{"2025-11-25", "2025-11-25"},
                                       std::pair{"2024-11-05", "2025-11-25"}}) {
    CAPTURE(asked);
    auto fresh = psych::mcp_server_session::open(f.options, "v");
    REQUIRE(fresh.has_value());
    inbox answer;
    fresh.value()->receive(fmt::format(R"({{"jsonrpc":"2.0","id":"i","method":"initialize","params":{{"protocolVersion":"{}"}}}})", asked),
                           answer.sink());
    auto d = parsed(answer.answer_to(R"("i")"));
    CHECK(std::string(d["result"]["protocolVersion"].GetString()) == settled);
    CHECK(d["result"]["capabilities"].HasMember("tools"));
    CHECK(fresh.value()->protocol_version() == settled);
  }
}

TEST_CASE("psych mcp: tools/list offers run_code, described from the catalogue, and read_tool_output") {
  fixture f;
  auto session = f.session();
  inbox replies;
  session->receive(R"({"jsonrpc":"2.0","id":3,"method":"tools/list"})", replies.sink());
  auto d = parsed(replies.answer_to("3"));
  const auto& tools = d["result"]["tools"];
  REQUIRE(tools.Size() == 2);
  CHECK(std::string(tools[0]["name"].GetString()) == "run_code");
  CHECK(std::string(tools[1]["name"].GetString()) == "read_tool_output");
  const std::string description = tools[0]["description"].GetString();
  CHECK(description.find("- count: Counts its calls.") != std::string::npos);
  CHECK(description.find("`await count(key=value)`") != std::string::npos);
  CHECK(description.find("get_tool_info") != std::string::npos);
  CHECK(description.find("1000 calls in this session") != std::string::npos);
  CHECK(std::string(tools[0]["inputSchema"]["required"][0].GetString()) == "program");
}

TEST_CASE("psych mcp: a program's value, failure and bad input come back as tool results") {
  fixture f;
  auto session = f.session();
  inbox replies;
  session->receive(run_code_call(4, "n = await count()\nreturn {'n': n, 'twice': n * 2}"), replies.sink());
  auto ok = payload_of(replies.answer_to("4"));
  CHECK_FALSE(ok.is_error);
  CHECK(ok.payload["value"]["twice"].GetInt() == 2);

  session->receive(run_code_call(5, "x = 1\nreturn x / 0"), replies.sink());
  auto failed = payload_of(replies.answer_to("5"));
  CHECK(failed.is_error);
  CHECK(std::string(failed.payload["failure"]["traceback"].GetString()).find("ZeroDivisionError") != std::string::npos);
  CHECK(failed.payload["failure"]["line"].GetInt() == 2);

  session->receive(R"({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"run_code","arguments":{"program":"1","wall":3}}})",
                   replies.sink());
  auto misspelt = payload_of(replies.answer_to("6"));
  CHECK(misspelt.is_error);
  CHECK(std::string(misspelt.payload["failure"]["kind"].GetString()) == "invalid_arguments");
  CHECK(std::string(misspelt.payload["failure"]["message"].GetString()).find("wall") != std::string::npos);

  session->receive(run_code_call(7, "1", R"(,"limits":{"wall_seconds":-1})"), replies.sink());
  auto negative = payload_of(replies.answer_to("7"));
  CHECK(std::string(negative.payload["failure"]["kind"].GetString()) == "invalid_limit");

  // A call's limits narrow the server's: a 1 s wall clock ends a 5 s sleep.
  const auto began = clock_type::now();
  session->receive(run_code_call(8, "import time\ntime.sleep(5)", R"(,"limits":{"wall_seconds":1})"), replies.sink());
  auto limited = payload_of(replies.answer_to("8"));
  CHECK(limited.is_error);
  CHECK(std::string(limited.payload["limit_hit"].GetString()) == "wall_seconds");
  CHECK(clock_type::now() - began < std::chrono::seconds(4));
}

TEST_CASE("psych mcp: what is not a request gets JSON-RPC's named errors, and the session goes on") {
  fixture f;
  auto session = f.session();
  inbox replies;
  const auto garbage = session->receive("{\"jsonrpc\": \"2.0\", \"id\": 9, \"method\": ", replies.sink());
  CHECK(garbage.what == psych::mcp_receipt::kind::rejected);
  CHECK(garbage.error_json.find("-32700") != std::string::npos);
  const auto batch = session->receive(R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])", replies.sink());
  CHECK(batch.what == psych::mcp_receipt::kind::rejected);
  CHECK(batch.error_json.find("-32600") != std::string::npos);
  session->receive(R"({"id":10,"method":"ping"})", replies.sink());
  CHECK(replies.answer_to("10").find("-32600") != std::string::npos);
  session->receive(R"({"jsonrpc":"2.0","id":11,"method":"resources/list"})", replies.sink());
  CHECK(replies.answer_to("11").find("-32601") != std::string::npos);
  session->receive(R"({"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"shell","arguments":{}}})",
                   replies.sink());
  CHECK(replies.answer_to("12").find("-32602") != std::string::npos);
  const auto null_id = session->receive(R"({"jsonrpc":"2.0","id":null,"method":"ping"})", replies.sink());
  CHECK(null_id.what == psych::mcp_receipt::kind::rejected);
  const auto stranger = session->receive(
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":77}})", replies.sink());
  CHECK(stranger.what == psych::mcp_receipt::kind::rejected);
  CHECK_FALSE(stranger.answerable);
  CHECK(stranger.problem.find("cancel_unknown_request") != std::string::npos);
  session->receive(R"({"jsonrpc":"2.0","id":13,"method":"ping"})", replies.sink());
  CHECK(replies.answer_to("13").find(R"("result":{})") != std::string::npos);
}

TEST_CASE("psych mcp: a cancelled call ends its program and is never answered") {
  fixture f;
  auto session = f.session();
  inbox replies;
  const auto began = clock_type::now();
  session->receive(run_code_call(20, "import time\ntime.sleep(30)"), replies.sink());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK(session->running() == 1);
  const auto cancelled = session->receive(
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":20,"reason":"user"}})", replies.sink());
  CHECK(cancelled.what == psych::mcp_receipt::kind::accepted);
  while (session->running() != 0 && clock_type::now() - began < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(session->running() == 0);
  CHECK(clock_type::now() - began < std::chrono::seconds(5));
  CHECK(replies.answer_to("20", std::chrono::milliseconds(200)).empty());
  // A cancel that crosses the answer it meant to stop is not a stranger's.
  session->receive(run_code_call(21, "1"), replies.sink());
  REQUIRE(!replies.answer_to("21").empty());
  CHECK(session->receive(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":21}})",
                         replies.sink()).what == psych::mcp_receipt::kind::accepted);
}

TEST_CASE("psych mcp: past the session's concurrency a call is refused at once, never queued") {
  fixture f;
  f.options.max_concurrent_per_session = 1;
  auto session = f.session();
  inbox replies;
  session->receive(run_code_call(30, "import time\ntime.sleep(1)\nreturn 1"), replies.sink());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  session->receive(run_code_call(31, "return 2"), replies.sink());
  auto busy = payload_of(replies.answer_to("31", std::chrono::milliseconds(500)));
  CHECK(busy.is_error);
  CHECK(std::string(busy.payload["failure"]["kind"].GetString()) == "too_many_executions");
  CHECK(payload_of(replies.answer_to("30")).payload["value"].GetInt() == 1);
}

TEST_CASE("psych mcp: one session is one Run: its programs share the Run's calls, even at once") {
  fixture f;
  f.options.budget.max_run_calls = 5;
  auto session = f.session();
  inbox replies;
  const std::string program =
      "import asyncio\nok = 0\nfor i in range(5):\n    try:\n        await count()\n        ok += 1\n"
      "    except ToolError as e:\n        return {'ok': ok, 'kind': e.kind}\n    await asyncio.sleep(0.05)\nreturn {'ok': ok}";
  session->receive(run_code_call(40, program), replies.sink());
  session->receive(run_code_call(41, program), replies.sink());
  auto first = payload_of(replies.answer_to("40"));
  auto second = payload_of(replies.answer_to("41"));
  const int made = first.payload["value"]["ok"].GetInt() + second.payload["value"]["ok"].GetInt();
  CHECK(made == 5);
  CHECK(f.calls.load() == 5);
  session->receive(run_code_call(42, program), replies.sink());
  auto third = payload_of(replies.answer_to("42"));
  CHECK(third.payload["value"]["ok"].GetInt() == 0);
  CHECK(std::string(third.payload["value"]["kind"].GetString()) == "budget_exhausted");
  // A new session is a new Run.
  auto other = f.session();
  other->receive(run_code_call(43, program), replies.sink());
  CHECK(payload_of(replies.answer_to("43")).payload["value"]["ok"].GetInt() == 5);
}

TEST_CASE("psych mcp: live output comes as progress on the call's token, before its answer") {
  fixture f;
  auto session = f.session();
  inbox replies;
  session->receive(run_code_call(50, "import time\nfor i in range(3):\n    print('line', i, '\u00e9', flush=True)\n    time.sleep(0.2)\nreturn 'done'",
                                  "", R"(,"_meta":{"progressToken":"tok"})"),
                   replies.sink());
  REQUIRE(!replies.answer_to("50").empty());
  std::string shown;
  std::uint64_t last = 0;
  bool answer_last = false;
  for (const auto& m : replies.snapshot()) {
    if (m.find("notifications/progress") == std::string::npos) {
      answer_last = m.find(R"("id":50)") != std::string::npos;
      continue;
    }
    auto d = parsed(m);
    const auto& params = d["params"];
    CHECK(std::string(params["progressToken"].GetString()) == "tok");
    CHECK(params["progress"].GetUint64() > last);
    last = params["progress"].GetUint64();
    shown += params["message"].GetString();
  }
  CHECK(answer_last);
  CHECK(shown == "line 0 \u00e9\nline 1 \u00e9\nline 2 \u00e9\n");
}

TEST_CASE("psych mcp: read_tool_output reads this session's handles, and only those") {
  fixture f;
  auto session = f.session();
  inbox replies;
  session->receive(run_code_call(60, "for i in range(5000):\n    print('row', i)"), replies.sink());
  auto big = payload_of(replies.answer_to("60"));
  REQUIRE_MESSAGE(big.payload.HasMember("partial"), replies.answer_to("60"));
  const std::string handle = big.payload["partial"]["stdout"]["handle"].GetString();
  session->receive(fmt::format(R"({{"jsonrpc":"2.0","id":61,"method":"tools/call","params":{{"name":"read_tool_output","arguments":{{"handle":"{}","offset":4990,"limit":5}}}}}})",
                               handle),
                   replies.sink());
  auto window = payload_of(replies.answer_to("61"));
  CHECK_FALSE(window.is_error);
  REQUIRE(window.payload["lines"].Size() == 5);
  CHECK(std::string(window.payload["lines"][0]["text"].GetString()) == "row 4990");
  auto other = f.session();
  other->receive(fmt::format(R"({{"jsonrpc":"2.0","id":62,"method":"tools/call","params":{{"name":"read_tool_output","arguments":{{"handle":"{}"}}}}}})",
                             handle),
                 replies.sink());
  auto denied = payload_of(replies.answer_to("62"));
  CHECK(denied.is_error);
  CHECK(std::string(denied.payload["failure"]["kind"].GetString()) == "denied");
}

TEST_CASE("psych mcp over stdio: an endless line is refused as it streams past, and the next message is served") {
  fixture f;
  int to_server[2], from_server[2];
  REQUIRE(::pipe2(to_server, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(from_server, O_CLOEXEC) == 0);
  psych::mcp_stdio_options bounds;
  bounds.max_message_bytes = 1 << 20;
  std::thread server([&] {
    auto served = psych::serve_mcp_stdio(f.options, to_server[0], from_server[1], bounds);
    CHECK(served.has_value());
    ::close(from_server[1]);
  });
  std::thread writer([&] {
    const std::string chunk(1 << 16, 'x');
    std::string head = R"({"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":")";
    (void)!::write(to_server[1], head.data(), head.size());
    for (int i = 0; i < 64; ++i) (void)!::write(to_server[1], chunk.data(), chunk.size());  // 4 MiB, one line
    const std::string rest = "\"}}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n";
    (void)!::write(to_server[1], rest.data(), rest.size());
    ::close(to_server[1]);
  });
  std::string out;
  char buffer[4096];
  for (long got; (got = ::read(from_server[0], buffer, sizeof buffer)) > 0;) out.append(buffer, static_cast<std::size_t>(got));
  writer.join();
  server.join();
  ::close(to_server[0]);
  ::close(from_server[0]);
  CHECK(out.find("request_too_large") != std::string::npos);
  CHECK(out.find(R"("id":2,"result":{})") != std::string::npos);
  CHECK(out.find(R"("id":1,)") == std::string::npos);
}

TEST_CASE("psych mcp: the deployment's allowlist reaches every program, and where it cannot hold it is refused") {
  fixture f;
  f.options.ask.network = psych::network_access::allowlist;
  f.options.ask.allowed_hosts = {"allowed.invalid"};
  SUBCASE("the process backend refuses it by name, and nothing runs") {
    auto session = f.session();
    inbox replies;
    session->receive(run_code_call(40, "return 1"), replies.sink());
    auto refused = payload_of(replies.answer_to("40"));
    CHECK(refused.is_error);
    CHECK(std::string(refused.payload["refused"]["reason"].GetString()) == "network_not_granted");
    CHECK(std::string(refused.payload["refused"]["message"].GetString()).find("isolation=process") != std::string::npos);
  }
  SUBCASE("at isolation=isolated the program has the proxy, which refuses a host no list names") {
    psych::local_sandbox_options isolated;
    isolated.isolation = psych::isolation_level::isolated;
    isolated.temp_root = f.dir.path().string();
    auto made = psych::local_sandbox(isolated);
    if (!made) {
      psych::testing::skip_case("no local backend reaches isolation=isolated here: " + made.error().message());
      return;
    }
    f.options.backend = made.value().get();
    f.options.ask.isolation = psych::isolation_level::isolated;
    auto session = f.session();
    inbox replies;
    // An unlisted name: refused before anything is resolved, so nothing leaves this machine.
    session->receive(run_code_call(41, R"(import os, socket
s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
s.sendall(b"CONNECT unlisted.invalid:443 HTTP/1.1\r\nHost: unlisted.invalid:443\r\n\r\n")
return [os.environ["HTTPS_PROXY"], s.recv(100).split(b"\r\n")[0].decode()])"),
                     replies.sink());
    auto ran = payload_of(replies.answer_to("41", std::chrono::seconds(30)));
    CHECK_FALSE(ran.is_error);
    REQUIRE(ran.payload["value"].IsArray());
    CHECK(std::string(ran.payload["value"][0].GetString()) == "http://127.0.0.1:3128");
    CHECK(std::string(ran.payload["value"][1].GetString()) == "HTTP/1.1 403 Forbidden");
    session.reset();
    f.options.backend = nullptr;
  }
}
