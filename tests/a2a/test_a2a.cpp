// The A2A binding source (include/psych/host/a2a.hpp) against a real peer on the official SDK
// (sdk_peer.mjs, suite "sdk") and against peers that misbehave (hostile_peer.mjs, suite
// "hostile"): every call ends in a named outcome within its deadline, CancelTask reaches the peer
// when a call is abandoned, host memory stays bounded, and the credential is never quoted.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>

#include <rapidjson/document.h>

#include "peer_process.hpp"
#include "psych/host/a2a.hpp"
#include "rss.hpp"
#include "skip.hpp"

using namespace psych;
using namespace std::chrono_literals;
using psych::testing::peer_process;

namespace {

using clock = std::chrono::steady_clock;

const std::string modules = PSYCH_A2A_MODULES;
const std::string here = PSYCH_A2A_TESTS;
constexpr std::string_view token = "a2a-secret-5d1f9c0e7b2a";
/// What a call may take past its deadline: the CancelTask's own short deadline, and a slow machine.
constexpr auto grace = 3s;

bool sdk_installed() {
  if (::access((modules + "/node_modules/@a2a-js/sdk/package.json").c_str(), R_OK) == 0) return true;
  FAIL_CHECK("@a2a-js/sdk is not installed in " << modules << ": run scripts/install-mcp-servers " << modules);
  return false;
}

peer_process sdk_peer(std::vector<std::string> extra = {}) {
  std::vector<std::string> arguments{"--modules", modules};
  arguments.insert(arguments.end(), extra.begin(), extra.end());
  return peer_process{here + "/sdk_peer.mjs", arguments};
}

peer_process hostile_peer(const std::string& mode) { return peer_process{here + "/hostile_peer.mjs", {mode}}; }

a2a_peer_config config_for(const peer_process& peer, std::chrono::milliseconds timeout = 20s) {
  return {.name = "peer", .url = peer.url(), .token = {}, .timeout = timeout, .start_timeout = 5s};
}

std::unique_ptr<a2a_binding_source> source_of(a2a_peer_config config) {
  auto source = a2a_binding_source::create({std::move(config)});
  REQUIRE_MESSAGE(source.has_value(), (source ? std::string() : source.error().message()));
  return std::move(source).value();
}

struct timed_outcome {
  tool_outcome outcome;
  std::chrono::milliseconds took;
};

/// One call through the source's invoker, as the gateway makes it; `stop_after` requests its stop.
timed_outcome call(a2a_binding_source& source, const std::string& tool, const std::string& arguments,
                   std::optional<std::chrono::milliseconds> stop_after = std::nullopt) {
  std::stop_source stop;
  std::promise<tool_outcome> promise;
  auto future = promise.get_future();
  const auto start = clock::now();
  source.invoke({.call_id = "c1", .execution_id = "e1", .tool = tool, .arguments_json = arguments}, stop.get_token(),
                [&promise](tool_outcome outcome) { promise.set_value(std::move(outcome)); });
  if (stop_after && future.wait_for(*stop_after) == std::future_status::timeout) stop.request_stop();
  auto outcome = future.get();
  return {std::move(outcome), std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start)};
}

void check_error(const timed_outcome& got, tool_error_kind kind) {
  INFO("outcome: " << (got.outcome.ok ? got.outcome.value_json : got.outcome.message));
  REQUIRE_FALSE(got.outcome.ok);
  CHECK(name_of(got.outcome.kind) == name_of(kind));
  CHECK(got.outcome.message.find(token) == std::string::npos);
}

rapidjson::Document json(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.data(), text.size());
  REQUIRE_FALSE(d.HasParseError());
  return d;
}

long peak_rss_kib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

/// No child of this process is left, running or waiting to be reaped.
void check_no_children() {
  errno = 0;
  CHECK(::waitpid(-1, nullptr, WNOHANG) == -1);
  CHECK(errno == ECHILD);
}

}  // namespace

TEST_SUITE("sdk") {
TEST_CASE("each skill of the card is offered as peer__skill") {
  if (!sdk_installed()) return;
  {
    auto peer = sdk_peer();
    auto source = source_of(config_for(peer));
    const auto offered = source->offered_now();
    std::vector<std::string> names;
    for (const auto& b : offered) {
      names.push_back(b.name);
      CHECK(b.origin == binding_origin::a2a);
      CHECK_FALSE(b.description.empty());
    }
    CHECK(names == std::vector<std::string>{"peer__echo", "peer__slow", "peer__ask", "peer__refuse", "peer__word-count"});
  }
  check_no_children();
}

TEST_CASE("a call is one task: the arguments as a data part, the artifacts as the result") {
  if (!sdk_installed()) return;
  auto peer = sdk_peer();
  auto source = source_of(config_for(peer));
  SUBCASE("text and data parts") {
    const auto got = call(*source, "peer__echo", R"({"text":"hello there"})");
    REQUIRE_MESSAGE(got.outcome.ok, got.outcome.message);
    const auto value = json(got.outcome.value_json);
    CHECK(std::string_view(value["state"].GetString()) == "completed");
    CHECK(value["task_id"].GetStringLength() > 0);
    const auto& parts = value["artifacts"][0]["parts"];
    CHECK(std::string_view(parts[0]["text"].GetString()) == "echo: hello there");
    CHECK(std::string_view(parts[1]["data"]["echoed"]["text"].GetString()) == "hello there");
    CHECK(parts[1]["data"]["length"].GetInt() == 11);
    CHECK(peer.saw(R"(call echo {"text":"hello there"})"));
    CHECK(peer.saw("rpc SendMessage"));
    CHECK(peer.saw("rpc GetTask"));
  }
  SUBCASE("a skill whose id is no identifier") {
    const auto got = call(*source, "peer__word-count", R"({"text":"one two three"})");
    REQUIRE_MESSAGE(got.outcome.ok, got.outcome.message);
    CHECK(json(got.outcome.value_json)["artifacts"][0]["parts"][0]["data"]["words"].GetInt() == 3);
  }
  SUBCASE("a failed task is tool_failed, with the peer's words") {
    const auto got = call(*source, "peer__refuse", "{}");
    check_error(got, tool_error_kind::tool_failed);
    CHECK(got.outcome.message.find("no skill refuse here") != std::string::npos);
    CHECK(got.outcome.message.find("failed") != std::string::npos);
  }
  SUBCASE("a task that needs input is input_required") {
    const auto got = call(*source, "peer__ask", "{}");
    check_error(got, tool_error_kind::input_required);
    CHECK(got.outcome.message.find("which city do you mean?") != std::string::npos);
  }
  SUBCASE("no peer of that name") {
    check_error(call(*source, "other__echo", "{}"), tool_error_kind::unknown_tool);
    check_error(call(*source, "echo", "{}"), tool_error_kind::unknown_tool);
  }
}

TEST_CASE("a task past its deadline, or whose call is cancelled, gets a CancelTask") {
  if (!sdk_installed()) return;
  auto peer = sdk_peer();
  SUBCASE("timeout") {
    auto source = source_of(config_for(peer, 1500ms));
    const auto got = call(*source, "peer__slow", R"({"seconds":60})");
    check_error(got, tool_error_kind::timeout);
    CHECK(got.took >= 1500ms);
    CHECK(got.took <= 1500ms + grace);
    CHECK(got.outcome.message.find("CancelTask accepted") != std::string::npos);
    CHECK(peer.saw("cancel "));
  }
  SUBCASE("cancelled") {
    auto source = source_of(config_for(peer));
    const auto got = call(*source, "peer__slow", R"({"seconds":60})", 700ms);
    check_error(got, tool_error_kind::cancelled);
    CHECK(got.took <= 700ms + grace);
    CHECK(peer.saw("cancel "));
  }
  SUBCASE("a slow task that ends in time is followed to its end") {
    auto source = source_of(config_for(peer));
    const auto got = call(*source, "peer__slow", R"({"seconds":1})");
    REQUIRE_MESSAGE(got.outcome.ok, got.outcome.message);
    CHECK(json(got.outcome.value_json)["artifacts"][0]["parts"][0]["text"].GetString() == std::string("done"));
    CHECK_FALSE(peer.saw("cancel ", 0ms));
  }
}

TEST_CASE("a peer that streams: the task followed through SendStreamingMessage's events") {
  if (!sdk_installed()) return;
  auto peer = sdk_peer({"--streaming"});
  auto source = source_of(config_for(peer, 2000ms));
  SUBCASE("text and data artifacts, from the artifact update") {
    const auto got = call(*source, "peer__echo", R"({"text":"streamed"})");
    REQUIRE_MESSAGE(got.outcome.ok, got.outcome.message);
    const auto value = json(got.outcome.value_json);
    CHECK(std::string_view(value["state"].GetString()) == "completed");
    CHECK(std::string_view(value["artifacts"][0]["parts"][0]["text"].GetString()) == "echo: streamed");
    CHECK(value["artifacts"][0]["parts"][1]["data"]["length"].GetInt() == 8);
    CHECK(peer.saw("rpc SendStreamingMessage"));
    CHECK_FALSE(peer.saw("rpc GetTask", 0ms));
  }
  SUBCASE("input required, from a status update") {
    const auto got = call(*source, "peer__ask", "{}");
    check_error(got, tool_error_kind::input_required);
    CHECK(got.outcome.message.find("which city do you mean?") != std::string::npos);
  }
  SUBCASE("failed") { check_error(call(*source, "peer__refuse", "{}"), tool_error_kind::tool_failed); }
  SUBCASE("timeout, with a CancelTask") {
    const auto got = call(*source, "peer__slow", R"({"seconds":60})");
    check_error(got, tool_error_kind::timeout);
    CHECK(got.took >= 2000ms);
    CHECK(got.took <= 2000ms + grace);
    CHECK(peer.saw("cancel "));
  }
  SUBCASE("cancelled, with a CancelTask") {
    const auto got = call(*source, "peer__slow", R"({"seconds":60})", 700ms);
    check_error(got, tool_error_kind::cancelled);
    CHECK(got.took <= 700ms + grace);
    CHECK(peer.saw("cancel "));
  }
}

TEST_CASE("the credential: sent fresh with every request, never quoted") {
  if (!sdk_installed()) return;
  auto peer = sdk_peer({"--token", std::string(token)});
  SUBCASE("the right one") {
    int resolved = 0;
    auto config = config_for(peer);
    config.token = [&resolved]() -> result<std::string> {
      ++resolved;
      return std::string(token);
    };
    auto source = source_of(config);
    CHECK(source->offered_now().size() == 5);
    const auto got = call(*source, "peer__echo", R"({"text":"x"})");
    REQUIRE_MESSAGE(got.outcome.ok, got.outcome.message);
    CHECK(resolved >= 3);  // the card, the SendMessage, at least one GetTask
  }
  SUBCASE("none: the card is refused, so nothing is offered, and a call is unavailable_binding") {
    auto source = source_of(config_for(peer));
    CHECK(source->offered_now().empty());
    const auto got = call(*source, "peer__echo", "{}");
    check_error(got, tool_error_kind::unavailable_binding);
    CHECK(got.outcome.message.find("401") != std::string::npos);
  }
  SUBCASE("a resolver that fails: nothing is sent") {
    auto config = config_for(peer);
    config.token = []() -> result<std::string> { return fail_with(error_kind::unreadable_file, "no token file"); };
    auto source = source_of(config);
    const auto got = call(*source, "peer__echo", "{}");
    check_error(got, tool_error_kind::unavailable_binding);
    CHECK(got.outcome.message.find("no token file") != std::string::npos);
  }
}
}  // TEST_SUITE("sdk")

TEST_SUITE("config") {
TEST_CASE("a configuration that cannot be used is refused before anything is sent") {
  const auto refused = [](a2a_peer_config config) {
    auto source = a2a_binding_source::create({std::move(config)});
    return source ? std::string() : source.error().message();
  };
  CHECK(refused({.name = "a__b", .url = "http://127.0.0.1:1"}).find("__") != std::string::npos);
  CHECK(refused({.name = "", .url = "http://127.0.0.1:1"}).find("empty") != std::string::npos);
  CHECK(refused({.name = "p", .url = "http://127.0.0.1:1", .timeout = 0ms}).find("positive") != std::string::npos);
  CHECK_FALSE(refused({.name = "p", .url = "http://example.com/"}).empty());  // http off loopback
  CHECK_FALSE(refused({.name = "p", .url = "ftp://127.0.0.1/"}).empty());
  auto two = a2a_binding_source::create({{.name = "p", .url = "http://127.0.0.1:1"}, {.name = "p", .url = "http://127.0.0.1:2"}});
  REQUIRE_FALSE(two.has_value());
  CHECK(two.error().message().find("two") != std::string::npos);
}
}  // TEST_SUITE("config")

TEST_SUITE("hostile") {
TEST_CASE("a 1 GiB agent card is refused at its bound, host memory bounded") {
  auto peer = hostile_peer("huge_card");
  const long before = peak_rss_kib();
  auto config = config_for(peer);
  auto source = source_of(config);
  const auto start = clock::now();
  CHECK(source->offered_now().empty());
  CHECK(clock::now() - start <= config.start_timeout + grace);
  const auto got = call(*source, "peer__work", "{}");
  check_error(got, tool_error_kind::unavailable_binding);
  CHECK(got.outcome.message.find("too_large") != std::string::npos);
  const long grew = peak_rss_kib() - before;
  MESSAGE("peak RSS grew by " << grew << " KiB reading a 1 GiB card (max_card_bytes " << config.max_card_bytes << ")");
  if (psych::testing::rss_is_meaningful) CHECK(grew < 64 * 1024);
  CHECK(peer.saw("flood stopped after "));
}

TEST_CASE("a card that sends requests to another origin is refused; nothing is sent there") {
  auto peer = hostile_peer("foreign_card");
  auto source = source_of(config_for(peer));
  CHECK(source->offered_now().empty());
  const auto got = call(*source, "peer__work", "{}");
  check_error(got, tool_error_kind::unavailable_binding);
  CHECK(got.outcome.message.find("another origin") != std::string::npos);
  CHECK(peer.events().empty());
}

TEST_CASE("a task that never ends: timeout at the deadline, and a CancelTask") {
  auto peer = hostile_peer("never_ends");
  auto source = source_of(config_for(peer, 1500ms));
  const auto got = call(*source, "peer__work", "{}");
  check_error(got, tool_error_kind::timeout);
  CHECK(got.took >= 1500ms);
  CHECK(got.took <= 1500ms + grace);
  CHECK(peer.saw("cancel t-never"));
}

TEST_CASE("a broken answer to SendMessage is unknown_outcome: it may have been accepted") {
  SUBCASE("malformed JSON-RPC") {
    auto peer = hostile_peer("malformed");
    auto source = source_of(config_for(peer));
    const auto got = call(*source, "peer__work", "{}");
    check_error(got, tool_error_kind::unknown_outcome);
    CHECK(got.outcome.message.find("malformed") != std::string::npos);
  }
  SUBCASE("another request's id") {
    auto peer = hostile_peer("wrong_id");
    auto source = source_of(config_for(peer));
    const auto got = call(*source, "peer__work", "{}");
    check_error(got, tool_error_kind::unknown_outcome);
    CHECK(got.outcome.message.find("wrong_id") != std::string::npos);
  }
}

TEST_CASE("a peer that echoes the credential: it is never quoted") {
  auto secret = [](a2a_peer_config config) {
    config.token = [] { return result<std::string>(std::string(token)); };
    return config;
  };
  SUBCASE("a 401 echoing it in its body and a header") {
    auto peer = hostile_peer("echo_401");
    auto source = source_of(secret(config_for(peer)));
    const auto got = call(*source, "peer__work", "{}");
    check_error(got, tool_error_kind::tool_failed);
    CHECK(got.outcome.message.find("401") != std::string::npos);
  }
  SUBCASE("a failed task whose status message quotes it") {
    auto peer = hostile_peer("echo_status");
    auto source = source_of(secret(config_for(peer)));
    const auto got = call(*source, "peer__work", "{}");
    check_error(got, tool_error_kind::tool_failed);
    CHECK(got.outcome.message.find("refused: Bearer [credential]") != std::string::npos);
  }
}

TEST_CASE("an answer that drips one byte a second ends at the deadline") {
  auto peer = hostile_peer("drip");
  auto source = source_of(config_for(peer, 2000ms));
  const auto got = call(*source, "peer__work", "{}");
  check_error(got, tool_error_kind::timeout);
  CHECK(got.took >= 2000ms);
  CHECK(got.took <= 2000ms + grace);
}

namespace {

/// A peer in `mode` sends without end: the call is refused at max_result_bytes (1 MiB), as
/// unknown_outcome naming too_large, the peer's log shows `event`, and the host's peak RSS stays
/// bounded.
void check_endless_answer(const char* mode, const char* event, const char* what) {
  auto peer = hostile_peer(mode);
  const long before = peak_rss_kib();
  auto config = config_for(peer);
  config.max_result_bytes = 1 << 20;
  auto source = source_of(config);
  const auto got = call(*source, "peer__work", "{}");
  check_error(got, tool_error_kind::unknown_outcome);
  CHECK(got.outcome.message.find("too_large") != std::string::npos);
  CHECK(peer.saw(event));
  const long grew = peak_rss_kib() - before;
  MESSAGE("peak RSS grew by " << grew << " KiB reading " << what << " (max_result_bytes 1 MiB)");
  if (psych::testing::rss_is_meaningful) CHECK(grew < 64 * 1024);
}

}  // namespace

TEST_CASE("a GetTask answer that never ends is refused at max_result_bytes, memory bounded, and cancelled") {
  check_endless_answer("huge_answer", "cancel t-huge", "an endless GetTask answer");
}

TEST_CASE("a stream whose one event never ends is refused at its bound, memory bounded") {
  check_endless_answer("endless_event", "flood stopped after ", "an endless SSE event");
}

TEST_CASE("a stream that drips after naming its task ends at the deadline, with a CancelTask") {
  auto peer = hostile_peer("stream_drip");
  auto source = source_of(config_for(peer, 2000ms));
  const auto got = call(*source, "peer__work", "{}");
  check_error(got, tool_error_kind::timeout);
  CHECK(got.took >= 2000ms);
  CHECK(got.took <= 2000ms + grace);
  CHECK(peer.saw("cancel t-stream_drip"));
}

TEST_CASE("a stream cut before the task ends: GetTask follows it") {
  auto peer = hostile_peer("stream_cut");
  auto source = source_of(config_for(peer));
  const auto got = call(*source, "peer__work", "{}");
  REQUIRE_MESSAGE(got.outcome.ok, got.outcome.message);
  CHECK(got.outcome.value_json.find("after the cut") != std::string::npos);
  CHECK(peer.saw("GetTask"));
}

TEST_CASE("a 0.3 peer: message/send, tasks/get, kebab-case states") {
  auto peer = hostile_peer("v0_3");
  auto source = source_of(config_for(peer));
  CHECK(source->offered_now().size() == 2);
  SUBCASE("completed") {
    const auto got = call(*source, "peer__work", R"({"n":1})");
    REQUIRE_MESSAGE(got.outcome.ok, got.outcome.message);
    CHECK(got.outcome.value_json.find(R"("state":"completed")") != std::string::npos);
    CHECK(got.outcome.value_json.find(R"({"data":{"got":{"n":1}}})") != std::string::npos);
    CHECK(got.outcome.value_json.find(R"({"file":{"name":"r.txt","mimeType":"text/plain","uri":"https://example.com/r.txt"}})") !=
          std::string::npos);
    CHECK(peer.saw("message/send"));
    CHECK(peer.saw("tasks/get"));
  }
  SUBCASE("input-required") {
    const auto got = call(*source, "peer__ask", "{}");
    check_error(got, tool_error_kind::input_required);
    CHECK(got.outcome.message.find("which one?") != std::string::npos);
  }
}
}  // TEST_SUITE("hostile")
