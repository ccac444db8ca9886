// URL templates and argument mapping (http_tool_request.hpp).
#include "http_tools/http_tool_request.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "psych/json_text.hpp"
#include "psych/protocol/json.hpp"

namespace psych::host {
namespace {

auto invalid(std::string detail) { return fail_with(error_kind::invalid_argument, std::move(detail)); }

bool is_placeholder(std::size_t piece_index) { return piece_index % 2 == 1; }

/// The JSON kind of one value by its first byte (the codec has already checked it is one value).
char kind_of(std::string_view raw) { return raw.empty() ? 'n' : raw.front(); }

/// A scalar as text: a string's characters, anything else its JSON text (42, true).
result<std::string> scalar_text(std::string_view raw) {
  if (kind_of(raw) == '"') return protocol::decode_json<std::string>(raw);
  return std::string(raw);
}

}  // namespace

std::vector<std::string> url_template::placeholders() const {
  std::vector<std::string> names;
  for (std::size_t i = 1; i < pieces.size(); i += 2) names.push_back(pieces[i]);
  return names;
}

std::string url_template::with_placeholders_as(std::string_view stand_in) const {
  std::string url = origin_url;
  for (std::size_t i = 0; i < pieces.size(); ++i) url += is_placeholder(i) ? std::string(stand_in) : pieces[i];
  if (!fixed_query.empty()) url.append("?").append(fixed_query);
  return url;
}

result<url_template> parse_url_template(std::string_view url) {
  const std::size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return invalid(fmt::format("'{}' is not an absolute http(s) URL", url));
  const std::size_t path_begin = std::min(url.find_first_of("/?#", scheme_end + 3), url.size());
  const std::size_t query_begin = std::min(url.find('?', path_begin), url.size());
  const std::string_view origin = url.substr(0, path_begin);
  const std::string_view path = url.substr(path_begin, query_begin - path_begin);
  const std::string_view query = query_begin < url.size() ? url.substr(query_begin + 1) : std::string_view{};
  if (origin.find_first_of("{}") != std::string_view::npos)
    return invalid("a placeholder in the URL's origin: an argument may never choose where a request goes");
  if (query.find_first_of("{}") != std::string_view::npos)
    return invalid("a placeholder in the URL's query: list query arguments in \"query\" instead");

  url_template parsed{.origin_url = std::string(origin), .pieces = {""}, .fixed_query = std::string(query)};
  if (path.empty()) parsed.pieces.front() = "/";
  for (std::size_t at = 0; at < path.size();) {
    const std::size_t open = path.find_first_of("{}", at);
    if (open == std::string_view::npos) {
      parsed.pieces.back().append(path.substr(at));
      break;
    }
    if (path[open] == '}') return invalid(fmt::format("a '}}' without its '{{' at byte {} of the path", open));
    const std::size_t close = path.find_first_of("{}/", open + 1);
    if (close == std::string_view::npos || path[close] != '}')
      return invalid(fmt::format("the placeholder at byte {} of the path is not closed within its segment", open));
    const std::string_view name = path.substr(open + 1, close - open - 1);
    if (name.empty()) return invalid(fmt::format("an empty placeholder '{{}}' at byte {} of the path", open));
    parsed.pieces.back().append(path.substr(at, open - at));
    parsed.pieces.emplace_back(name);
    parsed.pieces.emplace_back();
    at = close + 1;
  }
  return parsed;
}

std::string percent_encoded(std::string_view text) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    const bool unreserved = (byte >= 'A' && byte <= 'Z') || (byte >= 'a' && byte <= 'z') || (byte >= '0' && byte <= '9') ||
                            byte == '-' || byte == '.' || byte == '_' || byte == '~';
    if (unreserved) {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(hex[byte >> 4]);
      out.push_back(hex[byte & 0xF]);
    }
  }
  return out;
}

result<mapped_request> map_arguments(const url_template& url, const std::vector<std::string>& query,
                                     http_body_mapping body, std::string_view arguments_json) {
  auto decoded = protocol::decode_json<std::map<std::string, json_text>>(arguments_json);
  if (!decoded) return invalid(fmt::format("the arguments are not one JSON object: {}", decoded.error().message()));
  auto& arguments = decoded.value();
  std::set<std::string> placed;

  mapped_request request;
  for (std::size_t i = 0; i < url.pieces.size(); ++i) {
    if (!is_placeholder(i)) {
      request.target += url.pieces[i];
      continue;
    }
    const std::string& name = url.pieces[i];
    const auto found = arguments.find(name);
    if (found == arguments.end()) return invalid(fmt::format("the path argument '{}' is missing", name));
    const char kind = kind_of(found->second.text);
    if (kind == '{' || kind == '[' || kind == 'n')
      return invalid(fmt::format("the path argument '{}' must be a string, a number or a boolean", name));
    PSYCH_TRY(auto text, scalar_text(found->second.text));
    // Encoded, '/' too, it stays in its segment; "." and ".." would still climb the path.
    if (text.empty() || text == "." || text == "..")
      return invalid(fmt::format("the path argument '{}' cannot be empty, \".\" or \"..\"", name));
    request.target += percent_encoded(text);
    placed.insert(name);
  }

  std::string query_text = url.fixed_query;
  const auto add_parameter = [&](const std::string& name, const std::string& value) {
    if (!query_text.empty()) query_text += '&';
    query_text.append(percent_encoded(name)).append("=").append(percent_encoded(value));
  };
  for (const std::string& name : query) {
    const auto found = arguments.find(name);
    if (found == arguments.end()) continue;
    placed.insert(name);
    const std::string_view raw = found->second.text;
    if (kind_of(raw) == 'n') continue;  // null: the parameter is left out
    if (kind_of(raw) == '[') {
      PSYCH_TRY(auto elements, protocol::decode_json<std::vector<json_text>>(raw));
      for (const json_text& element : elements) {
        PSYCH_TRY(auto text, scalar_text(element.text));
        add_parameter(name, text);
      }
      continue;
    }
    PSYCH_TRY(auto text, scalar_text(raw));
    add_parameter(name, text);
  }
  if (!query_text.empty()) request.target.append("?").append(query_text);

  std::string body_json = "{";
  for (const auto& [name, value] : arguments) {
    if (placed.contains(name)) continue;
    if (body == http_body_mapping::none)
      return invalid(fmt::format("the argument '{}' has no place in this tool's request (path: {}; query: {})", name,
                                 fmt::join(url.placeholders(), ", "), fmt::join(query, ", ")));
    if (body_json.size() > 1) body_json += ',';
    body_json.append(protocol::encode_json(name)).append(":").append(value.text);
  }
  if (body == http_body_mapping::json) request.body_json = body_json + "}";
  return request;
}

}  // namespace psych::host
