#include "mcp_server/mcp_http_rules.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "http/http_link.hpp"
#include "mcp/json_rpc_wire.hpp"
#include "mcp_server/mcp_server_wire.hpp"
#include "psych/protocol/json.hpp"

namespace psych::host::mcp_http {
namespace {

// JSON-RPC's codes as MCP's HTTP servers use them: a transport's refusal is a server error, an
// unknown session the code clients look for to start a new one.
constexpr std::int64_t server_error = -32000;
constexpr std::int64_t session_not_found = -32001;

std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

bool same_letters(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

/// The host of an origin ("scheme://host[:port]"), without an IPv6 address's brackets; nullopt
/// for anything else ("null", a scheme other than http and https).
std::optional<std::string_view> origin_host(std::string_view origin) {
  const auto scheme_end = origin.find("://");
  if (scheme_end == std::string_view::npos) return std::nullopt;
  const auto scheme = origin.substr(0, scheme_end);
  if (!same_letters(scheme, "http") && !same_letters(scheme, "https")) return std::nullopt;
  auto rest = origin.substr(scheme_end + 3);
  if (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.starts_with('[')) {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    return rest.substr(1, close - 1);
  }
  return rest.substr(0, rest.find(':'));
}

}  // namespace

bool is_endpoint(std::string_view target) { return target.substr(0, target.find('?')) == endpoint; }

bool origin_allowed(std::optional<std::string_view> origin, std::string_view listen_host) {
  if (!origin) return true;
  const auto host = origin_host(*origin);
  if (!host || host->empty()) return false;
  if (same_letters(*host, "localhost") || is_loopback_host(*host)) return true;
  return same_letters(*host, listen_host);
}

bool accepts_event_stream(std::string_view accept) {
  while (!accept.empty()) {
    const auto comma = accept.find(',');
    auto range = accept.substr(0, comma);
    accept = comma == std::string_view::npos ? std::string_view{} : accept.substr(comma + 1);
    const auto semicolon = range.find(';');
    if (!same_letters(trimmed(range.substr(0, semicolon)), event_stream)) continue;
    bool refused = false;  // "q=0": the client says it does not take this type
    for (auto params = semicolon == std::string_view::npos ? std::string_view{} : range.substr(semicolon + 1);
         !params.empty();) {
      const auto next = params.find(';');
      const auto param = trimmed(params.substr(0, next));
      params = next == std::string_view::npos ? std::string_view{} : params.substr(next + 1);
      if (param.size() >= 2 && same_letters(param.substr(0, 2), "q=")) {
        const auto weight = param.substr(2);
        refused = !weight.empty() && weight.find_first_not_of("0.") == std::string_view::npos;
      }
    }
    if (!refused) return true;
  }
  return false;
}

bool speaks_version(std::string_view version) {
  return std::find(std::begin(mcp_server_versions), std::end(mcp_server_versions), version) !=
         std::end(mcp_server_versions);
}

message_outline outline_of(std::string_view message) {
  message_outline out;
  auto decoded = protocol::decode_json<mcp_server_wire::incoming>(message);
  if (!decoded) return out;  // not a JSON-RPC object: its session names what is wrong
  auto& in = decoded.value();
  out.method = in.method.value_or("");
  if (in.id) out.id = in.id->text;
  if (out.method == "notifications/cancelled" && !in.id && in.params) {
    auto params = protocol::decode_json<mcp_server_wire::cancelled_params>(in.params->text);
    if (params && params.value().requestId) out.cancelled_id = params.value().requestId->text;
  }
  return out;
}

unsigned status_of(mcp_http_refusal why) {
  switch (why) {
    using enum mcp_http_refusal;
    case unauthorized: return 401;
    case forbidden_origin: return 403;
    case no_such_path: return 404;
    case method_not_allowed: return 405;
    case missing_session_id: return 400;
    case unknown_session: return 404;
    case unsupported_protocol_version: return 400;
    case rejected_message: return 400;
    case too_large: return 413;
    case too_many_sessions: return 503;
    case too_many_requests: return 429;
    case session_failed: return 500;
    case shutting_down: return 503;
  }
  return 500;
}

std::string refusal_body(mcp_http_refusal why, std::string_view words) {
  const auto code = why == mcp_http_refusal::unknown_session ? session_not_found : server_error;
  return protocol::encode_json(json_rpc_wire::reply_error_out{
      .id = {"null"}, .error = {.code = code, .message = fmt::format("{}: {}", name_of(why), words)}});
}

std::string sse_event(std::string_view json) {
  std::string out = "event: message\n";
  for (;;) {
    const auto newline = json.find('\n');
    out.append("data: ").append(json.substr(0, newline)).push_back('\n');
    if (newline == std::string_view::npos) break;
    json.remove_prefix(newline + 1);
  }
  out.push_back('\n');
  return out;
}

}  // namespace psych::host::mcp_http
