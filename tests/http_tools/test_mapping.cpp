// Where a call's arguments go (http_tools/http_tool_request.hpp): a path argument stays inside its
// segment whatever it holds, query arguments are encoded, the rest is a JSON body or refused.
#include <doctest/doctest.h>

#include <string>

#include "http_tools/http_tool_request.hpp"
#include "http_tools/http_tool_response.hpp"

using namespace psych;
using namespace psych::host;

namespace {

url_template template_of(std::string_view url) {
  auto parsed = parse_url_template(url);
  if (!parsed) FAIL(parsed.error().message());
  return parsed.value();
}

std::string target_of(std::string_view url, std::string_view arguments, std::vector<std::string> query = {}) {
  auto mapped = map_arguments(template_of(url), query, http_body_mapping::none, arguments);
  if (!mapped) FAIL(mapped.error().message());
  return mapped.value().target;
}

std::string mapping_refusal(std::string_view url, std::string_view arguments, std::vector<std::string> query = {},
                       http_body_mapping body = http_body_mapping::none) {
  auto mapped = map_arguments(template_of(url), query, body, arguments);
  REQUIRE_FALSE(mapped);
  CHECK(mapped.error().kind == error_kind::invalid_argument);
  return mapped.error().detail;
}

}  // namespace

TEST_CASE("a URL template splits into its origin, path pieces and own query") {
  const auto t = template_of("https://api.example.com:8443/v1/{org}/items/{id}.json?format=full");
  CHECK(t.origin_url == "https://api.example.com:8443");
  CHECK(t.placeholders() == std::vector<std::string>{"org", "id"});
  CHECK(t.fixed_query == "format=full");
  CHECK(t.with_placeholders_as("x") == "https://api.example.com:8443/v1/x/items/x.json?format=full");
  CHECK(template_of("http://127.0.0.1:9").with_placeholders_as("x") == "http://127.0.0.1:9/");
}

TEST_CASE("path arguments are percent-encoded into one segment: no argument leaves the template's path") {
  const char* url = "http://127.0.0.1:9/files/{name}/meta";
  CHECK(target_of(url, R"({"name":"report"})") == "/files/report/meta");
  CHECK(target_of(url, R"({"name":"../admin"})") == "/files/..%2Fadmin/meta");
  CHECK(target_of(url, R"({"name":"a/b"})") == "/files/a%2Fb/meta");
  CHECK(target_of(url, R"({"name":"%2F.."})") == "/files/%252F../meta");
  CHECK(target_of(url, R"({"name":"a?b#c d"})") == "/files/a%3Fb%23c%20d/meta");
  CHECK(target_of(url, R"({"name":"//evil.example.com"})") == "/files/%2F%2Fevil.example.com/meta");
  CHECK(target_of(url, R"({"name":"é"})") == "/files/%C3%A9/meta");
  CHECK(target_of(url, R"({"name":42})") == "/files/42/meta");
  CHECK(target_of(url, R"({"name":true})") == "/files/true/meta");
  for (const char* climbing : {R"({"name":".."})", R"({"name":"."})", R"({"name":""})"}) {
    CAPTURE(climbing);
    CHECK(mapping_refusal(url, climbing).find("cannot be empty") != std::string::npos);
  }
  CHECK(mapping_refusal(url, R"({})").find("'name' is missing") != std::string::npos);
  CHECK(mapping_refusal(url, R"({"name":{"a":1}})").find("string, a number or a boolean") != std::string::npos);
  CHECK(mapping_refusal(url, R"({"name":null})").find("string, a number or a boolean") != std::string::npos);
}

TEST_CASE("query arguments are encoded after the template's own query; null leaves one out, a list repeats it") {
  const std::vector<std::string> query{"q", "limit", "tags", "missing", "none"};
  CHECK(target_of("http://127.0.0.1:9/search?v=2", R"({"q":"a b&c=d","limit":5,"tags":["x",1],"none":null})", query) ==
        "/search?v=2&q=a%20b%26c%3Dd&limit=5&tags=x&tags=1");
  CHECK(target_of("http://127.0.0.1:9/search", R"({})", query) == "/search");
  CHECK(target_of("http://127.0.0.1:9/search", R"({"q":{"a":[1]}})", query) == "/search?q=%7B%22a%22%3A%5B1%5D%7D");
}

TEST_CASE("the arguments left over are the JSON body, or a malformed call when the tool has none") {
  const auto t = template_of("http://127.0.0.1:9/items/{id}");
  auto mapped = map_arguments(t, {"dry_run"}, http_body_mapping::json,
                              R"({"id":"7","dry_run":true,"title":"new \"one\"","tags":[1,{"x":null}]})");
  REQUIRE(mapped);
  CHECK(mapped.value().target == "/items/7?dry_run=true");
  REQUIRE(mapped.value().body_json);
  CHECK(*mapped.value().body_json == R"({"tags":[1,{"x":null}],"title":"new \"one\""})");

  auto empty = map_arguments(t, {}, http_body_mapping::json, R"({"id":"7"})");
  REQUIRE(empty);
  CHECK(empty.value().body_json == "{}");

  CHECK(mapping_refusal("http://127.0.0.1:9/items/{id}", R"({"id":"7","titel":"x"})", {"q"})
            .find("'titel' has no place") != std::string::npos);
  for (const char* not_an_object : {"[]", "\"x\"", "{", "{\"a\":1,\"a\":2}"}) {
    CAPTURE(not_an_object);
    CHECK(mapping_refusal("http://127.0.0.1:9/x", not_an_object).find("not one JSON object") != std::string::npos);
  }
}

TEST_CASE("percent_encoded keeps only the unreserved bytes") {
  CHECK(percent_encoded("AZaz09-._~") == "AZaz09-._~");
  CHECK(percent_encoded(std::string_view("/?#[]@!$&'()*+,;=% \0\x7f\xff", 22)) ==
        "%2F%3F%23%5B%5D%40%21%24%26%27%28%29%2A%2B%2C%3B%3D%25%20%00%7F%FF");
}

TEST_CASE("a JSON media type is application/json or any +json, in any case, whatever its parameters") {
  for (const char* json : {"application/json", "Application/JSON; charset=utf-8", "application/problem+json",
                           "application/vnd.api+json ;v=1"}) {
    CAPTURE(json);
    CHECK(is_json_media_type(json));
  }
  for (const char* other : {"", "text/plain", "application/jsonl", "+json", "text/json-seq", "application/xml"}) {
    CAPTURE(other);
    CHECK_FALSE(is_json_media_type(other));
  }
}
