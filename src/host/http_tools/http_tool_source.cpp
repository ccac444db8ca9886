// Declared HTTP tools as one binding source (http_tool_source in psych/host/http_tools.hpp): each
// declaration checked once at create(), with an egress client of its own; each call mapped, sent
// once, and its response or failure turned into the outcome a program can branch on.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <utility>

#include <boost/beast/core/string.hpp>
#include <boost/hana/adapt_struct.hpp>
#include <fmt/format.h>

#include "http/egress.hpp"
#include "http_tools/http_tool_request.hpp"
#include "http_tools/http_tool_response.hpp"
#include "psych/host/blocking_invoker.hpp"
#include "psych/host/http_tools.hpp"
#include "psych/json_text.hpp"
#include "psych/protocol/json.hpp"

namespace psych::http_tool_schema {

/// The one part of an argument schema the declaration is checked against.
struct schema_view {
  std::optional<std::map<std::string, json_text>> properties;
};

}  // namespace psych::http_tool_schema

BOOST_HANA_ADAPT_STRUCT(psych::http_tool_schema::schema_view, properties);

namespace psych {
namespace {

using host::egress_error;
using host::egress_error_kind;

/// Header names a credential may not take: the egress writes them, and a second one would make the
/// request ambiguous.
constexpr std::array<std::string_view, 6> reserved_headers{"host", "content-length", "transfer-encoding",
                                                          "connection", "content-type", "accept"};

bool is_token(std::string_view text) {
  return !text.empty() && std::ranges::all_of(text, [](unsigned char c) {
    return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
  });
}

bool holds_line_break(std::string_view text) { return text.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos; }

/// One tool, checked, and the client of its origin.
struct declared_tool {
  http_tool declaration;
  host::url_template url;
  std::unique_ptr<host::egress_client> client;
};

/// Every problem of one declaration but its name's, as a detail without the tool's name.
result<declared_tool> checked(http_tool tool) {
  const auto invalid = [](std::string detail) { return fail_with(error_kind::invalid_argument, std::move(detail)); };
  if (!std::ranges::all_of(tool.method, [](char c) { return c >= 'A' && c <= 'Z'; }) || tool.method.empty())
    return invalid(fmt::format("the method '{}' is not an upper-case token", host::peer_excerpt(tool.method, 40)));
  // CONNECT would make the origin a tunnel; TRACE echoes the request, credential included.
  if (tool.method == "CONNECT" || tool.method == "TRACE") return invalid(fmt::format("the method {} is refused", tool.method));
  PSYCH_TRY(auto url, host::parse_url_template(tool.url_template));
  if (auto parsed = host::parse_http_url(url.with_placeholders_as("x")); !parsed)
    return invalid(fmt::format("the URL: {}", parsed.error().detail));

  // Decoding into a struct refuses every JSON value but an object.
  auto schema = protocol::decode_json<http_tool_schema::schema_view>(tool.input_schema_json);
  if (!schema) return invalid("the input schema is not one JSON object: " + schema.error().message());
  const auto listed = [&](const std::string& name) {
    return !schema.value().properties || schema.value().properties->contains(name);
  };
  const auto placeholders = url.placeholders();
  for (const std::string& name : placeholders)
    if (!listed(name)) return invalid(fmt::format("the path argument '{}' is not a property of the input schema", name));
  std::set<std::string_view> query_names;
  for (const std::string& name : tool.query) {
    if (name.empty()) return invalid("an empty query argument name");
    if (!query_names.insert(name).second) return invalid(fmt::format("the query argument '{}' is listed twice", name));
    if (std::ranges::find(placeholders, name) != placeholders.end())
      return invalid(fmt::format("'{}' is both a path and a query argument", name));
    if (!listed(name)) return invalid(fmt::format("the query argument '{}' is not a property of the input schema", name));
  }
  if (tool.body == http_body_mapping::json && (tool.method == "GET" || tool.method == "HEAD"))
    return invalid(fmt::format("a {} request has no body: body \"json\" needs another method", tool.method));

  if (tool.credential) {
    const http_credential& credential = *tool.credential;
    if (!is_token(credential.header))
      return invalid(fmt::format("the credential header '{}' is not a header name", host::peer_excerpt(credential.header, 60)));
    if (std::ranges::any_of(reserved_headers,
                            [&](std::string_view name) { return boost::beast::iequals(name, credential.header); }))
      return invalid(fmt::format("the credential header cannot be {}: the request writes it itself", credential.header));
    if (holds_line_break(credential.prefix)) return invalid("the credential prefix holds a line break");
    if (!credential.resolve) return invalid("the credential has no resolver");
  }
  if (tool.timeout.count() <= 0) return invalid("the timeout must be positive");
  if (tool.max_response_bytes == 0) return invalid("max_response_bytes must be positive");

  auto client = host::egress_client::create(
      url.origin_url, {.ca_file = tool.ca_file, .allow_insecure_http = tool.allow_insecure_http});
  if (!client) return invalid(client.error().detail);
  return declared_tool{.declaration = std::move(tool), .url = std::move(url), .client = std::move(client).value()};
}

bool is_safe_method(std::string_view method) { return method == "GET" || method == "HEAD"; }

/// What a program sees of an exchange that produced no response.
tool_outcome outcome_of_failure(const egress_error& e, const http_tool& tool, std::string_view secret) {
  const std::string detail = host::redact(e.message(), secret);
  switch (e.kind) {
    case egress_error_kind::refused:
      return tool_outcome::error(tool_error_kind::denied, "the egress rule refused the request: " + detail);
    case egress_error_kind::unreachable:
      return tool_outcome::error(tool_error_kind::tool_failed, detail + " (nothing was sent)");
    case egress_error_kind::timeout:
      return tool_outcome::error(tool_error_kind::timeout,
                                 fmt::format("no whole response within {} ms: {}", tool.timeout.count(), detail));
    case egress_error_kind::cancelled: return tool_outcome::error(tool_error_kind::cancelled, detail);
    case egress_error_kind::too_large:
      return tool_outcome::error(tool_error_kind::binding_result_too_large,
                                 fmt::format("the response passed this tool's bound of {} bytes "
                                             "(max_response_bytes); it was not read further: {}",
                                             tool.max_response_bytes, detail));
    case egress_error_kind::malformed:
    case egress_error_kind::connection_lost:
      // A request with effects that may have reached the server is never sent again.
      if (e.sent && !is_safe_method(tool.method))
        return tool_outcome::error(tool_error_kind::unknown_outcome,
                                   fmt::format("the {} may have reached the server: {}", tool.method, detail));
      return tool_outcome::error(tool_error_kind::tool_failed, detail);
  }
  return tool_outcome::error(tool_error_kind::tool_failed, detail);
}

}  // namespace

struct http_tool_source::impl {
  std::map<std::string, declared_tool, std::less<>> tools;
  std::vector<binding> offered;
  std::unique_ptr<blocking_invoker> invoker;  ///< reset first: its pool uses the clients

  tool_outcome call(std::string_view name, std::string_view arguments_json, std::stop_token stop) const {
    const auto found = tools.find(name);
    if (found == tools.end())
      return tool_outcome::error(tool_error_kind::unknown_tool, fmt::format("no HTTP tool is named {}", name));
    const declared_tool& tool = found->second;
    const http_tool& declaration = tool.declaration;

    auto mapped = host::map_arguments(tool.url, declaration.query, declaration.body, arguments_json);
    if (!mapped) return tool_outcome::error(tool_error_kind::malformed_call, mapped.error().detail);

    host::egress_request request{.method = declaration.method, .target = std::move(mapped.value().target)};
    request.headers.emplace_back("Accept", "application/json, */*;q=0.5");
    std::string secret;
    if (declaration.credential) {
      auto resolved = declaration.credential->resolve();
      if (!resolved)
        return tool_outcome::error(tool_error_kind::tool_failed,
                                   "the credential could not be resolved (nothing was sent): " +
                                       resolved.error().message());
      secret = std::move(resolved).value();
      if (holds_line_break(secret))
        return tool_outcome::error(tool_error_kind::tool_failed,
                                   "the resolved credential holds a line break (nothing was sent)");
      request.headers.emplace_back(declaration.credential->header, declaration.credential->prefix + secret);
    }
    if (mapped.value().body_json) {
      request.headers.emplace_back("Content-Type", "application/json");
      request.body = std::move(*mapped.value().body_json);
    }
    const host::egress_limits limits{.deadline = std::chrono::steady_clock::now() + declaration.timeout,
                                     .max_body_bytes = declaration.max_response_bytes};
    auto response = tool.client->fetch(request, limits, std::move(stop));
    if (!response) return outcome_of_failure(response.error(), declaration, secret);
    const auto& head = response.value().head;
    return host::outcome_of_answer({.status = head.status, .content_type = head.header("Content-Type"),
                                    .location = head.header("Location"), .body = response.value().body},
                                   secret);
  }
};

http_tool_source::http_tool_source(std::unique_ptr<impl> i) : impl_(std::move(i)) {}

http_tool_source::~http_tool_source() { impl_->invoker.reset(); }

result<std::unique_ptr<http_tool_source>> http_tool_source::create(std::vector<http_tool> tools, std::size_t threads) {
  auto i = std::make_unique<impl>();
  for (http_tool& tool : tools) {
    if (tool.name.empty()) return fail_with(error_kind::invalid_argument, "an HTTP tool with an empty name");
    if (i->tools.contains(tool.name))
      return fail_with(error_kind::invalid_argument, fmt::format("two HTTP tools are named '{}'", tool.name));
    std::string name = tool.name;
    auto declared = checked(std::move(tool));
    if (!declared)
      return fail_with(declared.error().kind, fmt::format("the HTTP tool '{}': {}", name, declared.error().detail));
    i->offered.push_back({.name = name, .description = declared.value().declaration.description,
                          .input_schema_json = declared.value().declaration.input_schema_json, .deferred = false,
                          .origin = binding_origin::tool});
    i->tools.emplace(std::move(name), std::move(declared).value());
  }
  impl* raw = i.get();
  i->invoker = std::make_unique<blocking_invoker>(
      [raw](const tool_call& call) {
        const auto found = raw->tools.find(call.tool);
        if (found == raw->tools.end() || !found->second.declaration.is_destructive()) return call_permission::allow();
        return call_permission::approval(
            fmt::format("the HTTP tool {} sends {}, which may change something; a tool that does not is declared "
                        "\"destructive\": false",
                        call.tool, found->second.declaration.method));
      },
      [raw](const owned_tool_call& call, std::stop_token stop) {
        return raw->call(call.tool, call.arguments_json, std::move(stop));
      },
      threads);
  return std::unique_ptr<http_tool_source>{new http_tool_source{std::move(i)}};
}

std::vector<binding> http_tool_source::offered_now() { return impl_->offered; }

call_permission http_tool_source::permit(const tool_call& call) { return impl_->invoker->permit(call); }

void http_tool_source::invoke(const tool_call& call, std::stop_token stop, std::function<void(tool_outcome)> done) {
  impl_->invoker->invoke(call, std::move(stop), std::move(done));
}

tool_outcome http_tool_source::call(std::string_view tool, std::string_view arguments_json, std::stop_token stop) {
  return impl_->call(tool, arguments_json, std::move(stop));
}

}  // namespace psych
