// The MCP client over Streamable HTTP (include/psych/host/mcp_http_client.hpp) against a real server
// on @modelcontextprotocol/sdk's StreamableHTTPServerTransport, answering as SSE and as JSON, and
// against a hostile one (mcp_http_peers.cjs): each misbehaviour a named error within the call's
// deadline, the credential in no result and no message, memory bounded.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <rapidjson/document.h>

#include "psych/host/mcp.hpp"
#include "psych/host/mcp_http_client.hpp"
#include "mcp_http_peer.hpp"
#include "rss.hpp"
#include "skip.hpp"
#include "text.hpp"

extern char** environ;

using namespace psych;
using namespace std::chrono_literals;
using psych::testing::contains;

namespace {

const std::string modules = PSYCH_MCP_PREFIX;
const std::string peers_script = PSYCH_MCP_HTTP_PEERS;
/// Distinctive, so that a leak anywhere is found by a plain search.
const std::string secret = "mcp-http-secret-7f3a9c2e51";

/// True when node and the SDK are installed; otherwise a failure that says how to install them,
/// or a skip under PSYCH_SKIP_MCP=1.
bool sdk_ready(std::source_location where = std::source_location::current()) {
  if (::access((modules + "/node_modules/@modelcontextprotocol/sdk/package.json").c_str(), R_OK) == 0 &&
      ::access(PSYCH_NODE, X_OK) == 0)
    return true;
  const char* skip = std::getenv("PSYCH_SKIP_MCP");
  if (skip != nullptr && std::string_view{skip} == "1") {
    psych::testing::skip_case("node or the MCP SDK is not installed in " + modules + " and PSYCH_SKIP_MCP=1", where);
    return false;
  }
  FAIL_CHECK("node or the MCP SDK is not installed in " << modules << ": run scripts/install-mcp-servers " << modules
                                                        << " (or set PSYCH_SKIP_MCP=1 to skip these tests)");
  return false;
}

/// A peer of mcp_http_peers.cjs (mcp_http_peer.hpp).
struct peer_process : psych::testing::mcp_http_peer {
  explicit peer_process(std::vector<std::string> arguments)
      : mcp_http_peer(PSYCH_NODE, peers_script, std::move(arguments)) {}
};

std::string why(const mcp_error& e) { return e.message(); }

mcp_server_config config_for(std::string url, std::chrono::milliseconds timeout = 20s) {
  mcp_server_config c;
  c.name = "web";
  c.url = std::move(url);
  c.timeout = timeout;
  c.start_timeout = 30s;
  return c;
}

std::unique_ptr<mcp_client> start(const mcp_server_config& config) {
  auto client = start_mcp_http_client(config);
  REQUIRE_MESSAGE(client.has_value(), (client ? "" : why(client.error())));
  return std::move(client).value();
}

/// The text of a call's first content item.
std::string first_text(const std::string& result_json) {
  rapidjson::Document d;
  d.Parse(result_json.data(), result_json.size());
  REQUIRE(!d.HasParseError());
  REQUIRE(d.HasMember("content"));
  REQUIRE(d["content"].IsArray());
  REQUIRE(d["content"].Size() >= 1);
  return d["content"][0]["text"].GetString();
}

/// What the SDK server saw (its `seen` tool), as a document.
rapidjson::Document seen_by(mcp_client& client) {
  auto answer = client.call_tool("seen", "{}", {});
  REQUIRE_MESSAGE(answer.has_value(), (answer ? "" : why(answer.error())));
  rapidjson::Document d;
  const std::string text = first_text(answer.value().json);
  d.Parse(text.data(), text.size());
  REQUIRE(!d.HasParseError());
  return d;
}

int calls_of(const rapidjson::Document& seen, const char* tool) {
  const auto& calls = seen["calls"];
  return calls.HasMember(tool) ? calls[tool].GetInt() : 0;
}

template <class F>
std::chrono::milliseconds timed(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
}

tool_outcome invoke_and_wait(tool_invoker& invoker, std::string_view tool, std::string_view arguments) {
  auto promise = std::make_shared<std::promise<tool_outcome>>();
  auto answer = promise->get_future();
  invoker.invoke({.call_id = "c1", .execution_id = "e1", .tool = tool, .arguments_json = arguments}, {},
                 [promise](tool_outcome outcome) { promise->set_value(std::move(outcome)); });
  REQUIRE(answer.wait_for(30s) == std::future_status::ready);
  return answer.get();
}

/// The grace past a deadline: the best-effort notifications/cancelled (0.5 s) and scheduling.
constexpr auto grace = 1500ms;

}  // namespace

// ---- the SDK's server ---------------------------------------------------------------------------

TEST_CASE("sdk server: handshake, tools, calls, large output, in SSE and JSON answers") {
  if (!sdk_ready()) return;
  for (const bool json : {false, true}) {
    CAPTURE(json);
    std::vector<std::string> arguments{"sdk", "--modules", modules};
    if (json) arguments.emplace_back("--json");
    peer_process peer{arguments};
    auto client = start(config_for(peer.url("/mcp")));
    CHECK(client->protocol_version() == "2025-06-18");
    CHECK(client->pid() == 0);
    CHECK(client->usable());
    CHECK(client->take_tools_changed());

    auto tools = client->list_tools();
    REQUIRE_MESSAGE(tools.has_value(), (tools ? "" : why(tools.error())));
    std::vector<std::string> names;
    for (const auto& t : tools.value()) names.push_back(t.name);
    CHECK(std::find(names.begin(), names.end(), "echo") != names.end());
    CHECK(std::find(names.begin(), names.end(), "slow") != names.end());

    auto echoed = client->call_tool("echo", R"({"text":"héllo over HTTP"})", {});
    REQUIRE_MESSAGE(echoed.has_value(), (echoed ? "" : why(echoed.error())));
    CHECK(first_text(echoed.value().json) == "héllo over HTTP");

    // 4 MiB of output, through the bounded reader.
    auto large = client->call_tool("large", R"({"bytes":4194304})", {});
    REQUIRE_MESSAGE(large.has_value(), (large ? "" : why(large.error())));
    CHECK(first_text(large.value().json).size() == 4194304);

    auto failed = client->call_tool("fail", "{}", {});
    REQUIRE_FALSE(failed.has_value());
    CHECK(failed.error().kind == mcp_error_kind::tool_failed);
    CHECK(failed.error().detail == "it went wrong");

    auto unknown = client->call_tool("no_such_tool", "{}", {});
    REQUIRE_FALSE(unknown.has_value());
    CHECK((unknown.error().kind == mcp_error_kind::rpc_error || unknown.error().kind == mcp_error_kind::tool_failed));

    // Every request after initialize carried MCP-Protocol-Version.
    auto seen = seen_by(*client);
    REQUIRE(seen["protocolVersions"].Size() >= 4);
    for (const auto& v : seen["protocolVersions"].GetArray()) CHECK(std::string_view{v.GetString()} == "2025-06-18");
    CHECK(seen["sessions"].GetInt() == 1);
  }
}

TEST_CASE("sdk server: protocol version 2025-11-25, asked for and then sent with every request") {
  if (!sdk_ready()) return;
  peer_process peer{{"sdk", "--modules", modules}};
  auto config = config_for(peer.url("/mcp"));
  config.protocol_version = "2025-11-25";
  auto client = start(config);
  CHECK(client->protocol_version() == "2025-11-25");
  auto echoed = client->call_tool("echo", R"({"text":"newer"})", {});
  REQUIRE_MESSAGE(echoed.has_value(), (echoed ? "" : why(echoed.error())));
  CHECK(first_text(echoed.value().json) == "newer");
  auto seen = seen_by(*client);
  REQUIRE(seen["protocolVersions"].Size() >= 2);
  for (const auto& v : seen["protocolVersions"].GetArray()) CHECK(std::string_view{v.GetString()} == "2025-11-25");
}

TEST_CASE("sdk server: a timeout ends the call at its deadline, cancels it, and never sends it again") {
  if (!sdk_ready()) return;
  peer_process peer{{"sdk", "--modules", modules}};
  auto client = start(config_for(peer.url("/mcp")));
  mcp_result<mcp_call_result> answer = mcp_call_result{};
  const auto took = timed([&] { answer = client->call_tool("slow", R"({"ms":20000})", {}, 700ms); });
  REQUIRE_FALSE(answer.has_value());
  CHECK(answer.error().kind == mcp_error_kind::timeout);
  CHECK(took >= 700ms);
  CHECK(took < 700ms + grace);

  std::stop_source stop;
  std::jthread stopper{[&] {
    std::this_thread::sleep_for(400ms);
    stop.request_stop();
  }};
  const auto took_cancelled = timed([&] { answer = client->call_tool("slow", R"({"ms":20000})", stop.get_token()); });
  REQUIRE_FALSE(answer.has_value());
  CHECK(answer.error().kind == mcp_error_kind::cancelled);
  CHECK(took_cancelled < 400ms + grace);

  // The server heard both notifications/cancelled; each call ran once.
  std::this_thread::sleep_for(300ms);
  auto seen = seen_by(*client);
  CHECK(calls_of(seen, "slow") == 2);
  CHECK(seen["cancelled"].GetInt() == 2);
  CHECK(client->usable());
}

TEST_CASE("sdk server: the bearer token is resolved for every request and appears nowhere") {
  if (!sdk_ready()) return;
  peer_process peer{{"sdk", "--modules", modules, "--token", secret}};
  auto resolved = std::make_shared<std::atomic<int>>(0);
  auto config = config_for(peer.url("/mcp"));
  config.token = [resolved]() -> result<std::string> {
    ++*resolved;
    return secret;
  };
  {
    auto client = start(config);
    const int after_handshake = resolved->load();
    CHECK(after_handshake >= 2);  // initialize, notifications/initialized
    // The server quotes the header it was sent: the program is handed no credential.
    auto who = client->call_tool("whoami", "{}", {});
    REQUIRE_MESSAGE(who.has_value(), (who ? "" : why(who.error())));
    CHECK_FALSE(contains(who.value().json, secret));
    CHECK(first_text(who.value().json) == "you sent Bearer [credential]");
    CHECK(resolved->load() == after_handshake + 1);
  }
  // A wrong credential: the server's 401 quotes it; the error does not.
  const std::string wrong = "mcp-http-secret-wrong-0b1d";
  config.token = [wrong]() -> result<std::string> { return wrong; };
  auto refused = start_mcp_http_client(config);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().kind == mcp_error_kind::unauthorized);
  CHECK_FALSE(contains(refused.error().message(), "mcp-http-secret"));
  // A resolver that fails: nothing is sent.
  config.token = []() -> result<std::string> { return fail_with(error_kind::sandbox_setup, "no vault"); };
  auto unresolved = start_mcp_http_client(config);
  REQUIRE_FALSE(unresolved.has_value());
  CHECK(unresolved.error().kind == mcp_error_kind::no_credential);
}

TEST_CASE("sdk server: a lost session fails its request, is never re-sent, and the next begins a new one") {
  if (!sdk_ready()) return;
  peer_process peer{{"sdk", "--modules", modules}};
  auto client = start(config_for(peer.url("/mcp")));
  auto forgot = client->call_tool("forget", "{}", {});
  REQUIRE(forgot.has_value());
  std::this_thread::sleep_for(100ms);
  auto lost = client->call_tool("echo", R"({"text":"lost"})", {});
  REQUIRE_FALSE(lost.has_value());
  CHECK(lost.error().kind == mcp_error_kind::session_expired);
  CHECK(client->take_tools_changed());  // drained, so that the new session's is seen
  auto again = client->call_tool("echo", R"({"text":"again"})", {});
  REQUIRE_MESSAGE(again.has_value(), (again ? "" : why(again.error())));
  CHECK(first_text(again.value().json) == "again");
  CHECK(client->take_tools_changed());  // a new session lists its tools again
  auto seen = seen_by(*client);
  CHECK(seen["sessions"].GetInt() == 2);
  CHECK(calls_of(seen, "echo") == 1);  // "lost" never reached the tool
}

TEST_CASE("sdk server: closing the client DELETEs its session") {
  if (!sdk_ready()) return;
  peer_process peer{{"sdk", "--modules", modules}};
  { auto gone = start(config_for(peer.url("/mcp"))); }
  auto client = start(config_for(peer.url("/mcp")));
  auto seen = seen_by(*client);
  CHECK(seen["deleted"].GetInt() == 1);
}

TEST_CASE("sdk server: as a binding source, with the kinds a program sees") {
  if (!sdk_ready()) return;
  peer_process peer{{"sdk", "--modules", modules, "--json"}};
  std::vector<std::unique_ptr<mcp_client>> clients;
  clients.push_back(start(config_for(peer.url("/mcp"), 1s)));
  auto source = mcp_binding_source::create(std::move(clients));
  REQUIRE(source.has_value());
  bool offers_echo = false;
  for (const auto& b : source.value()->offered_now()) offers_echo = offers_echo || b.name == "web__echo";
  CHECK(offers_echo);
  auto echoed = invoke_and_wait(*source.value(), "web__echo", R"({"text":"as a binding"})");
  REQUIRE(echoed.ok);
  CHECK(first_text(echoed.value_json) == "as a binding");
  auto slow = invoke_and_wait(*source.value(), "web__slow", R"({"ms":20000})");
  CHECK(slow.kind == tool_error_kind::timeout);
  (void)invoke_and_wait(*source.value(), "web__forget", "{}");
  std::this_thread::sleep_for(100ms);
  auto lost = invoke_and_wait(*source.value(), "web__echo", R"({"text":"x"})");
  CHECK(lost.kind == tool_error_kind::unavailable_binding);
}

TEST_CASE("configuration: refused by name, nothing sent") {
  mcp_server_config c = config_for("http://127.0.0.1:9/mcp");
  auto by_start = mcp_client::start(c);
  REQUIRE_FALSE(by_start.has_value());
  CHECK(by_start.error().kind == mcp_error_kind::invalid_config);
  CHECK(contains(by_start.error().detail, "start_mcp_http_client"));

  c.command = {"true"};
  auto both = start_mcp_http_client(c);
  REQUIRE_FALSE(both.has_value());
  CHECK(both.error().kind == mcp_error_kind::invalid_config);

  auto off_loopback = start_mcp_http_client(config_for("http://192.0.2.1/mcp"));
  REQUIRE_FALSE(off_loopback.has_value());
  CHECK(off_loopback.error().kind == mcp_error_kind::invalid_config);

  auto unspoken = config_for("http://127.0.0.1:9/mcp");
  unspoken.protocol_version = "2024-11-05";
  auto old_version = start_mcp_http_client(unspoken);
  REQUIRE_FALSE(old_version.has_value());
  CHECK(old_version.error().kind == mcp_error_kind::invalid_config);

  auto no_timeout = start_mcp_http_client(config_for("http://127.0.0.1:9/mcp", 0ms));
  REQUIRE_FALSE(no_timeout.has_value());
  CHECK(no_timeout.error().kind == mcp_error_kind::invalid_config);

  // Nothing listens on port 9 (discard): unreachable, by name.
  auto nobody = start_mcp_http_client(config_for("http://127.0.0.1:9/mcp"));
  REQUIRE_FALSE(nobody.has_value());
  CHECK(nobody.error().kind == mcp_error_kind::unreachable);
}

// ---- the hostile server ---------------------------------------------------------------------------

namespace {

peer_process& hostile() {
  static peer_process peer{{"hostile"}};
  return peer;
}

struct hostile_call {
  mcp_result<mcp_call_result> answer = mcp_call_result{};
  std::chrono::milliseconds took{};
};

/// A client of the hostile server at `path` (which answers the handshake well), and one call.
hostile_call call_hostile(std::string_view path, std::chrono::milliseconds timeout, std::stop_token stop = {}) {
  auto config = config_for(hostile().url(path), timeout);
  config.token = []() -> result<std::string> { return secret; };
  auto client = start(config);
  hostile_call c;
  c.took = timed([&] { c.answer = client->call_tool("go", "{}", std::move(stop)); });
  if (!c.answer) {
    CHECK_FALSE(contains(c.answer.error().message(), secret));
    MESSAGE(path << ": " << c.answer.error().message() << " after " << c.took.count() << " ms");
  }
  return c;
}

}  // namespace

TEST_CASE("hostile: an endless SSE event is refused at its bound, memory bounded") {
  if (!sdk_ready()) return;
  (void)hostile();
  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  auto c = call_hostile("/endless", 20s);
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  REQUIRE_FALSE(c.answer.has_value());
  CHECK(c.answer.error().kind == mcp_error_kind::protocol_violation);
  CHECK(c.took < 20s);
  const long grown_kib = after.ru_maxrss - before.ru_maxrss;
  MESSAGE("peak RSS before " << before.ru_maxrss << " KiB, after " << after.ru_maxrss << " KiB");
  if (psych::testing::rss_is_meaningful) CHECK(grown_kib < 64 * 1024);
}

TEST_CASE("hostile: a one-byte-a-second drip ends at the call's deadline") {
  if (!sdk_ready()) return;
  auto c = call_hostile("/drip", 2500ms);
  REQUIRE_FALSE(c.answer.has_value());
  CHECK(c.answer.error().kind == mcp_error_kind::timeout);
  CHECK(c.took >= 2500ms);
  CHECK(c.took < 2500ms + grace);
}

TEST_CASE("hostile: malformed JSON-RPC, as JSON and as SSE") {
  if (!sdk_ready()) return;
  for (const char* path : {"/garbage", "/garbage-sse", "/accepted"}) {
    CAPTURE(path);
    auto c = call_hostile(path, 5s);
    REQUIRE_FALSE(c.answer.has_value());
    CHECK(c.answer.error().kind == mcp_error_kind::protocol_violation);
  }
}

TEST_CASE("hostile: an answer carrying another request's id") {
  if (!sdk_ready()) return;
  for (const char* path : {"/wrong-id", "/wrong-id-sse"}) {
    CAPTURE(path);
    auto c = call_hostile(path, 5s);
    REQUIRE_FALSE(c.answer.has_value());
    CHECK(c.answer.error().kind == mcp_error_kind::protocol_violation);
    CHECK(contains(c.answer.error().detail, "of another request"));
  }
}

TEST_CASE("hostile: a 401 and a 500 that echo the credential, a redirect to another origin") {
  if (!sdk_ready()) return;
  auto unauthorized = call_hostile("/unauthorized", 5s);
  REQUIRE_FALSE(unauthorized.answer.has_value());
  CHECK(unauthorized.answer.error().kind == mcp_error_kind::unauthorized);

  auto broken = call_hostile("/server-error", 5s);
  REQUIRE_FALSE(broken.answer.has_value());
  CHECK(broken.answer.error().kind == mcp_error_kind::http_error);
  CHECK(broken.answer.error().rpc_code == 500);
  CHECK(contains(broken.answer.error().detail, "[credential]"));

  auto redirected = call_hostile("/redirect", 5s);
  REQUIRE_FALSE(redirected.answer.has_value());
  CHECK(redirected.answer.error().kind == mcp_error_kind::refused);
  CHECK(contains(redirected.answer.error().detail, "307"));
}

TEST_CASE("hostile: a ping inside the stream is answered; list_changed is noted") {
  if (!sdk_ready()) return;
  auto config = config_for(hostile().url("/ping-first"), 5s);
  auto client = start(config);
  CHECK(client->take_tools_changed());
  CHECK_FALSE(client->take_tools_changed());
  auto answer = client->call_tool("go", "{}", {});
  REQUIRE_MESSAGE(answer.has_value(), (answer ? "" : why(answer.error())));
  CHECK(first_text(answer.value().json) == "after the ping");
  CHECK(client->take_tools_changed());
}

TEST_CASE("hostile: a stream cut before the answer is of unknown outcome; a silent one is cancelled") {
  if (!sdk_ready()) return;
  auto cut = call_hostile("/cut", 5s);
  REQUIRE_FALSE(cut.answer.has_value());
  CHECK(cut.answer.error().kind == mcp_error_kind::connection_lost);

  std::stop_source stop;
  std::jthread stopper{[&] {
    std::this_thread::sleep_for(300ms);
    stop.request_stop();
  }};
  auto silent = call_hostile("/silent", 10s, stop.get_token());
  REQUIRE_FALSE(silent.answer.has_value());
  CHECK(silent.answer.error().kind == mcp_error_kind::cancelled);

  // Through the binding source: the cut call may have happened.
  auto config = config_for(hostile().url("/cut"), 5s);
  std::vector<std::unique_ptr<mcp_client>> clients;
  clients.push_back(start(config));
  auto source = mcp_binding_source::create(std::move(clients));
  REQUIRE(source.has_value());
  auto outcome = invoke_and_wait(*source.value(), "web__go", "{}");
  CHECK(outcome.kind == tool_error_kind::unknown_outcome);
}
