// Declarations: http_tool_source::create refuses every unusable one, naming the tool and the
// problem, before anything is sent; the JSON file refuses what it does not know, by name.
#include <doctest/doctest.h>

#include <functional>
#include <string>

#include "http_tools_support.hpp"

using namespace psych;
using namespace psych::testing;

namespace {

/// create()'s error for one tool, declared by `change` from a good loopback GET.
std::string refusal_of(const std::function<void(http_tool&)>& change) {
  http_tool tool{.name = "lookup", .url_template = "http://127.0.0.1:9/items/{id}",
                 .input_schema_json = R"({"type":"object","properties":{"id":{"type":"string"},"q":{}}})"};
  change(tool);
  auto created = http_tool_source::create({std::move(tool)});
  if (created) return "";
  CHECK(created.error().kind == error_kind::invalid_argument);
  return created.error().message();
}

}  // namespace

TEST_CASE("create refuses an unusable declaration, naming the tool and the problem") {
  CHECK(refusal_of([](http_tool&) {}).empty());
  const struct {
    const char* what;
    std::function<void(http_tool&)> change;
    const char* says;
  } cases[] = {
      {"an empty name", [](http_tool& t) { t.name.clear(); }, "empty name"},
      {"a lower-case method", [](http_tool& t) { t.method = "get"; }, "'get' is not an upper-case token"},
      {"TRACE", [](http_tool& t) { t.method = "TRACE"; }, "TRACE is refused"},
      {"no scheme", [](http_tool& t) { t.url_template = "127.0.0.1/items/{id}"; }, "not an absolute"},
      {"a placeholder in the host", [](http_tool& t) { t.url_template = "https://{id}.example.com/x"; }, "origin"},
      {"a placeholder in the query", [](http_tool& t) { t.url_template = "http://127.0.0.1:9/x?id={id}"; }, "query"},
      {"an unclosed placeholder", [](http_tool& t) { t.url_template = "http://127.0.0.1:9/x/{id/y"; }, "not closed"},
      {"an empty placeholder", [](http_tool& t) { t.url_template = "http://127.0.0.1:9/x/{}"; }, "empty placeholder"},
      {"a stray brace", [](http_tool& t) { t.url_template = "http://127.0.0.1:9/x}"; }, "without its"},
      {"another scheme", [](http_tool& t) { t.url_template = "ftp://127.0.0.1/{id}"; }, "URL"},
      {"user information", [](http_tool& t) { t.url_template = "http://user:pw@127.0.0.1:9/{id}"; }, "URL"},
      {"http:// off loopback", [](http_tool& t) { t.url_template = "http://example.com/items/{id}"; }, "lookup"},
      {"a path argument the schema lacks", [](http_tool& t) { t.url_template = "http://127.0.0.1:9/{other}"; },
       "'other' is not a property"},
      {"a query argument the schema lacks", [](http_tool& t) { t.query = {"limit"}; }, "'limit' is not a property"},
      {"a query argument twice", [](http_tool& t) { t.query = {"q", "q"}; }, "listed twice"},
      {"a path argument in the query too", [](http_tool& t) { t.query = {"id"}; }, "both a path and a query"},
      {"a schema that is no object", [](http_tool& t) { t.input_schema_json = "[1]"; }, "not one JSON object"},
      {"a body for GET", [](http_tool& t) { t.body = http_body_mapping::json; }, "has no body"},
      {"a credential in the Host header",
       [](http_tool& t) { t.credential = http_credential{.header = "Host", .resolve = [] { return result<std::string>("x"); }}; },
       "cannot be Host"},
      {"a credential header with a space",
       [](http_tool& t) { t.credential = http_credential{.header = "X Key", .resolve = [] { return result<std::string>("x"); }}; },
       "not a header name"},
      {"a credential prefix with a line break",
       [](http_tool& t) { t.credential = http_credential{.prefix = "a\r\nX: y", .resolve = [] { return result<std::string>("x"); }}; },
       "line break"},
      {"a credential without a resolver", [](http_tool& t) { t.credential = http_credential{}; }, "no resolver"},
      {"a zero timeout", [](http_tool& t) { t.timeout = std::chrono::milliseconds(0); }, "timeout"},
      {"a zero bound", [](http_tool& t) { t.max_response_bytes = 0; }, "max_response_bytes"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    const std::string refusal = refusal_of(c.change);
    CHECK(refusal.find(c.says) != std::string::npos);
    if (std::string_view(c.what) != "an empty name") CHECK(refusal.find("'lookup'") != std::string::npos);
  }
}

TEST_CASE("create refuses two tools of one name, and https off loopback is declared without any traffic") {
  auto twice = http_tool_source::create({{.name = "a", .url_template = "http://127.0.0.1:9/"},
                                         {.name = "a", .url_template = "http://127.0.0.1:9/"}});
  REQUIRE_FALSE(twice);
  CHECK(twice.error().message().find("two HTTP tools are named 'a'") != std::string::npos);
  // Declaring is not calling: an https origin elsewhere is accepted and never reached here.
  auto remote = http_tool_source::create({{.name = "weather", .url_template = "https://api.example.com/v1/{city}"}});
  CHECK(remote);
}

TEST_CASE("the tools offered are the declarations, origin tool, destructive by method unless declared") {
  auto source = source_of({{.name = "read", .description = "reads", .url_template = "http://127.0.0.1:9/r",
                            .input_schema_json = R"({"type":"object"})"},
                           {.name = "write", .method = "POST", .url_template = "http://127.0.0.1:9/w"},
                           {.name = "search", .method = "POST", .url_template = "http://127.0.0.1:9/s",
                            .destructive = false},
                           {.name = "purge", .url_template = "http://127.0.0.1:9/p", .destructive = true}});
  const auto offered = source->offered_now();
  REQUIRE(offered.size() == 4);
  for (const auto& b : offered) CHECK(b.origin == binding_origin::tool);
  const auto find = [&](std::string_view name) {
    for (const auto& b : offered)
      if (b.name == name) return b;
    FAIL("not offered: " << name);
    return binding{};
  };
  CHECK(find("read").description == "reads");
  CHECK(find("read").input_schema_json == R"({"type":"object"})");

  const auto permit = [&](std::string_view name) {
    return source->permit({.call_id = "c", .execution_id = "e", .tool = name, .arguments_json = "{}"});
  };
  CHECK(permit("read").decision == call_permission::verdict::allowed);
  CHECK(permit("search").decision == call_permission::verdict::allowed);
  const auto write = permit("write");
  CHECK(write.decision == call_permission::verdict::needs_approval);
  CHECK(write.reason.find("POST") != std::string::npos);
  CHECK(permit("purge").decision == call_permission::verdict::needs_approval);  // a GET declared destructive
  CHECK(permit("nobody").decision == call_permission::verdict::allowed);  // invoke says unknown_tool
}

TEST_CASE("the JSON file: every member read, a credential taken from a command or the environment") {
  auto parsed = parse_http_tools(R"({"tools":[
    {"name":"get_item","description":"one item","method":"GET","url":"https://api.example.com/v1/items/{id}",
     "input_schema":{"type":"object","properties":{"id":{"type":"string"},"fields":{}}},"query":["fields"],
     "body":"none","credential":{"header":"X-Api-Key","prefix":"","command":"printf %s key"},
     "destructive":false,"timeout_seconds":2.5,"max_response_bytes":1000,"ca_file":"/etc/ca.pem",
     "allow_insecure_http":false},
    {"name":"create","method":"POST","url":"http://127.0.0.1:8080/items","body":"json",
     "credential":{"env":"PSYCH_HTTP_TOOLS_TEST_TOKEN"}}]})");
  if (!parsed) FAIL(parsed.error().message());
  const auto& tools = parsed.value();
  REQUIRE(tools.size() == 2);
  const http_tool& get = tools[0];
  CHECK(get.name == "get_item");
  CHECK(get.description == "one item");
  CHECK(get.url_template == "https://api.example.com/v1/items/{id}");
  CHECK(get.input_schema_json == R"({"type":"object","properties":{"id":{"type":"string"},"fields":{}}})");
  CHECK(get.query == std::vector<std::string>{"fields"});
  CHECK(get.body == http_body_mapping::none);
  CHECK(get.destructive == false);
  CHECK(get.timeout == std::chrono::milliseconds(2500));
  CHECK(get.max_response_bytes == 1000);
  CHECK(get.ca_file == "/etc/ca.pem");
  REQUIRE(get.credential);
  CHECK(get.credential->header == "X-Api-Key");
  CHECK(get.credential->prefix.empty());
  auto key = get.credential->resolve();
  REQUIRE(key);
  CHECK(key.value() == "key");

  const http_tool& create = tools[1];
  CHECK(create.method == "POST");
  CHECK(create.body == http_body_mapping::json);
  CHECK(create.is_destructive());
  CHECK(create.timeout == std::chrono::milliseconds(30000));
  REQUIRE(create.credential);
  CHECK(create.credential->header == "Authorization");
  CHECK(create.credential->prefix == "Bearer ");
  ::unsetenv("PSYCH_HTTP_TOOLS_TEST_TOKEN");
  auto unset = create.credential->resolve();
  REQUIRE_FALSE(unset);
  CHECK(unset.error().message().find("PSYCH_HTTP_TOOLS_TEST_TOKEN") != std::string::npos);
  ::setenv("PSYCH_HTTP_TOOLS_TEST_TOKEN", "fresh-1", 1);
  CHECK(create.credential->resolve().value() == "fresh-1");
  ::setenv("PSYCH_HTTP_TOOLS_TEST_TOKEN", "fresh-2", 1);  // read at each call: a rotated secret is picked up
  CHECK(create.credential->resolve().value() == "fresh-2");
  ::unsetenv("PSYCH_HTTP_TOOLS_TEST_TOKEN");
}

TEST_CASE("the JSON file refuses what it does not know, by name") {
  const struct {
    const char* what;
    const char* text;
    const char* says;
  } cases[] = {
      {"a misspelt safety member", R"({"tools":[{"name":"a","url":"http://127.0.0.1/","destructve":false}]})",
       "destructve"},
      {"a misspelt credential member",
       R"({"tools":[{"name":"a","url":"http://127.0.0.1/","credential":{"comand":"x"}}]})", "comand"},
      {"a credential written inline",
       R"({"tools":[{"name":"a","url":"http://127.0.0.1/","credential":{"token":"s3cret"}}]})", "token"},
      {"a credential from two places",
       R"({"tools":[{"name":"a","url":"http://127.0.0.1/","credential":{"command":"x","env":"Y"}}]})",
       "exactly one of"},
      {"a credential from nowhere", R"({"tools":[{"name":"a","url":"http://127.0.0.1/","credential":{}}]})",
       "exactly one of"},
      {"an unknown body mapping", R"({"tools":[{"name":"a","url":"http://127.0.0.1/","body":"form"}]})", "body"},
      {"no url", R"({"tools":[{"name":"a"}]})", "url"},
      {"no tools", R"({"servers":[]})", "tools"},
      {"a member beside tools", R"({"tools":[],"extra":1})", "extra"},
      {"a negative timeout", R"({"tools":[{"name":"a","url":"http://127.0.0.1/","timeout_seconds":-1}]})",
       "timeout_seconds"},
      {"a zero bound", R"({"tools":[{"name":"a","url":"http://127.0.0.1/","max_response_bytes":0}]})",
       "max_response_bytes"},
      {"malformed JSON", R"({"tools":[)", "json"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    auto parsed = parse_http_tools(c.text);
    REQUIRE_FALSE(parsed);
    CAPTURE(parsed.error().message());
    CHECK(parsed.error().message().find(c.says) != std::string::npos);
    // The inline secret is never quoted back.
    CHECK(parsed.error().message().find("s3cret") == std::string::npos);
  }
}
