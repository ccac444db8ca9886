// Whole calls against an honest loopback server: the request it reads (method, path, query, body,
// credential) and what the program receives (JSON, text, bytes, an HTTP status as http_error).
#include <doctest/doctest.h>

#include <atomic>
#include <future>
#include <string>

#include "http_tools_support.hpp"

using namespace psych;
using namespace psych::testing;

namespace {

/// Answers each path as a small API would.
bool api(const seen_request& request, loopback_server::tcp::socket& socket, const loopback_server&) {
  const std::string& target = request.target;
  if (target.starts_with("/items/")) return loopback_server::respond(socket, 200, "application/json", R"({"id":"7","name":"seven","stock":7,"price":1.5e3,"ratio":-0.25,"big":123456789012345678901234567890,"live":true,"gone":null})");
  if (target == "/echo") {
    return loopback_server::respond(socket, 201, "application/json; charset=utf-8",
                                    R"({"method":")" + request.method + R"(","body":)" +
                                        (request.body.empty() ? std::string("null") : request.body) + "}");
  }
  if (target == "/text") return loopback_server::respond(socket, 200, "text/plain; charset=utf-8", "hello, world\n");
  if (target == "/bytes") return loopback_server::respond(socket, 200, "application/octet-stream", std::string("\x89PNG\xff\x00", 6));
  if (target == "/bad-json") return loopback_server::respond(socket, 200, "application/json", R"({"a":1,)");
  if (target == "/no-content") return loopback_server::respond(socket, 204, "", "");
  if (target == "/old") return loopback_server::respond(socket, 302, "text/html", "moved", {{"Location", "/items/7"}});
  if (target == "/teapot") return loopback_server::respond(socket, 418, "text/plain", "short and stout\x01");
  return loopback_server::respond(socket, 404, "application/json", R"({"error":"no such thing"})");
}

}  // namespace

TEST_CASE("a GET with path and query arguments reaches its path and returns the JSON body as the value") {
  loopback_server server(api);
  http_tool tool = tool_at(server, "get_item", "/items/{id}");
  tool.query = {"fields", "expand"};
  tool.credential = secret_credential();
  auto source = source_of({tool});
  const auto outcome = call(*source, "get_item", R"({"id":"7","fields":"name,id","expand":true})");
  REQUIRE(outcome.ok);
  CHECK(outcome.value_json == R"({"id":"7","name":"seven","stock":7,"price":1.5e3,"ratio":-0.25,"big":123456789012345678901234567890,"live":true,"gone":null})");
  const auto seen = server.requests();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].method == "GET");
  CHECK(seen[0].target == "/items/7?fields=name%2Cid&expand=true");
  CHECK(seen[0].headers.at("authorization") == "Bearer " + std::string(distinctive_secret));
  CHECK(seen[0].headers.at("host") == "127.0.0.1:" + std::to_string(server.port()));
  CHECK(seen[0].body.empty());
}

TEST_CASE("the credential is resolved afresh for every call, in the header the declaration names") {
  loopback_server server(api);
  auto calls = std::make_shared<std::atomic<int>>(0);
  http_tool tool = tool_at(server, "get_item", "/items/{id}");
  tool.credential = http_credential{.header = "X-Api-Key", .prefix = "", .resolve = [calls] {
                                      return result<std::string>("key-" + std::to_string(++*calls));
                                    }};
  auto source = source_of({tool});
  CHECK(call(*source, "get_item", R"({"id":"1"})").ok);
  CHECK(call(*source, "get_item", R"({"id":"2"})").ok);
  const auto seen = server.requests();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].headers.at("x-api-key") == "key-1");
  CHECK(seen[1].headers.at("x-api-key") == "key-2");
  CHECK_FALSE(seen[0].headers.contains("authorization"));

  // A resolver that fails: nothing is sent, and the program is told why without the value.
  http_tool failing = tool_at(server, "failing", "/items/{id}");
  failing.credential = http_credential{.resolve = [] { return result<std::string>(fail_with(error_kind::provider_error, "the vault is sealed")); }};
  auto refusing = source_of({failing});
  const auto outcome = call(*refusing, "failing", R"({"id":"1"})");
  CHECK(outcome.kind == tool_error_kind::tool_failed);
  CHECK(outcome.message.find("the vault is sealed") != std::string::npos);
  CHECK(server.requests().size() == 2);
}

TEST_CASE("POST: refused in a program by default, allowed when declared not destructive, its body JSON") {
  loopback_server server(api);
  http_tool create = tool_at(server, "create", "/echo");
  create.method = "POST";
  create.body = http_body_mapping::json;
  http_tool search = create;
  search.name = "search";
  search.destructive = false;
  auto source = source_of({create, search});
  const auto ask = [&](std::string_view name) {
    return source->permit({.call_id = "c", .execution_id = "e", .tool = name, .arguments_json = "{}"});
  };
  CHECK(ask("create").decision == call_permission::verdict::needs_approval);
  CHECK(ask("search").decision == call_permission::verdict::allowed);

  // invoke() runs the call on the source's pool, as the gateway does.
  std::promise<tool_outcome> answered;
  source->invoke({.call_id = "c1", .execution_id = "e1", .tool = "search", .arguments_json = R"({"q":"cats","n":3})"},
                 {}, [&](tool_outcome outcome) { answered.set_value(std::move(outcome)); });
  const auto outcome = answered.get_future().get();
  REQUIRE_MESSAGE(outcome.ok, outcome.message);
  CHECK(outcome.value_json == R"({"method":"POST","body":{"n":3,"q":"cats"}})");
  const auto seen = server.requests();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].headers.at("content-type") == "application/json");
}

TEST_CASE("results: JSON as its value, text and bytes wrapped with the status, malformed JSON a tool failure") {
  loopback_server server(api);
  auto source = source_of({tool_at(server, "text", "/text"), tool_at(server, "bytes", "/bytes"),
                           tool_at(server, "bad_json", "/bad-json"), tool_at(server, "no_content", "/no-content")});
  const auto text = call(*source, "text");
  REQUIRE(text.ok);
  CHECK(text.value_json == R"({"status":200,"content_type":"text/plain; charset=utf-8","text":"hello, world\n"})");
  const auto bytes = call(*source, "bytes");
  REQUIRE(bytes.ok);
  CHECK(bytes.value_json == R"({"status":200,"content_type":"application/octet-stream","base64":"iVBOR/8A"})");
  const auto bad = call(*source, "bad_json");
  CHECK_FALSE(bad.ok);
  CHECK(bad.kind == tool_error_kind::tool_failed);
  CHECK(bad.message.starts_with("HTTP 200: the response says it is JSON but is not"));
  const auto none = call(*source, "no_content");
  REQUIRE(none.ok);
  CHECK(none.value_json == R"({"status":204,"content_type":"","text":""})");
}

TEST_CASE("a status that is not 2xx is http_error, the status first, the answer quoted safely") {
  loopback_server server(api);
  auto source = source_of({tool_at(server, "missing", "/nowhere"), tool_at(server, "teapot", "/teapot")});
  const auto missing = call(*source, "missing");
  CHECK(missing.kind == tool_error_kind::http_error);
  CHECK(missing.message == R"(HTTP 404: {"error":"no such thing"})");
  const auto teapot = call(*source, "teapot");
  CHECK(teapot.kind == tool_error_kind::http_error);
  CHECK(teapot.message == "HTTP 418: short and stout?");  // a control byte never reaches a terminal raw
}

TEST_CASE("a redirect within the origin is followed for a GET; a POST's is returned as it is") {
  loopback_server server(api);
  http_tool post = tool_at(server, "post_old", "/old");
  post.method = "POST";
  auto source = source_of({tool_at(server, "old", "/old"), post});
  const auto followed = call(*source, "old");
  REQUIRE_MESSAGE(followed.ok, followed.message);
  CHECK(followed.value_json == R"({"id":"7","name":"seven","stock":7,"price":1.5e3,"ratio":-0.25,"big":123456789012345678901234567890,"live":true,"gone":null})");
  auto seen = server.requests();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].target == "/old");
  CHECK(seen[1].target == "/items/7");

  const auto not_followed = call(*source, "post_old");
  CHECK(not_followed.kind == tool_error_kind::http_error);
  CHECK(not_followed.message.starts_with("HTTP 302: a redirect that is not followed (Location: /items/7)"));
  CHECK(server.requests().size() == 3);
}

TEST_CASE("a call the mapping cannot place is malformed and never sent; an unknown tool is unknown_tool") {
  loopback_server server(api);
  auto source = source_of({tool_at(server, "get_item", "/items/{id}")});
  const auto stray = call(*source, "get_item", R"({"id":"7","extra":1})");
  CHECK(stray.kind == tool_error_kind::malformed_call);
  CHECK(stray.message.find("'extra' has no place") != std::string::npos);
  CHECK(call(*source, "get_item", R"({"id":".."})").kind == tool_error_kind::malformed_call);
  CHECK(call(*source, "get_item", "[1]").kind == tool_error_kind::malformed_call);
  CHECK(call(*source, "nobody").kind == tool_error_kind::unknown_tool);
  CHECK(server.connections() == 0);
}
