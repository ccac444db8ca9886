#include "egress/proxy_request.hpp"

#include <algorithm>
#include <iterator>

#include <boost/beast/core/string.hpp>
#include <fmt/format.h>

namespace psych::host::egress {

namespace http = boost::beast::http;

namespace {

proxy_refusal malformed_request(std::string detail) {
  return {400, proxy_error::http_request_error, std::move(detail)};
}

std::string_view view_of(boost::beast::string_view text) { return {text.data(), text.size()}; }

/// "host", "host:port", "[v6]", "[v6]:port": a host pattern's syntax without its wildcard, which
/// canonicalizes the host as the allowlist's patterns are.
std::optional<host_pattern> authority_of(std::string_view text) {
  auto parsed = parse_host_pattern(text);
  if (!parsed || parsed.value().any_subdomain) return std::nullopt;
  return std::move(parsed).value();
}

/// The host and port a plain request's Host field names, which must be its URL's.
refusal_or<void> check_host_field(const http::request_header<>& head, const proxy_target& target) {
  if (head.count(http::field::host) != 1) return malformed_request("a plain request needs exactly one Host header");
  const std::string_view value = view_of(head[http::field::host]);
  const auto named = authority_of(value);
  if (!named) return malformed_request(fmt::format("the Host header \"{}\" is not host[:port]", printable(value, 100)));
  if (named->host != target.host.host || named->port.value_or(80) != target.port)
    return proxy_refusal{
        403, proxy_error::http_request_denied,
        fmt::format("the Host header names {}, the URL {}", printable(value, 100), target.authority())};
  return boost::outcome_v2::success();
}

/// A plain request's body comes as Content-Length or as a single "chunked" coding, nothing the
/// destination could frame otherwise than the proxy did.
refusal_or<void> check_framing(const http::request_header<>& head) {
  const auto codings = head.count(http::field::transfer_encoding);
  if (codings == 0) return boost::outcome_v2::success();
  if (head.version() == 10) return malformed_request("Transfer-Encoding in an HTTP/1.0 request");
  if (codings > 1 || !boost::beast::iequals(head[http::field::transfer_encoding], "chunked"))
    return malformed_request("a transfer coding other than chunked alone");
  return boost::outcome_v2::success();
}

refusal_or<proxy_target> tunnel_target(const http::request_header<>& head) {
  const std::string_view target = view_of(head.target());
  const auto named = authority_of(target);
  if (!named || !named->port)
    return malformed_request(
        fmt::format("CONNECT names host:port (CONNECT example.com:443), not \"{}\"", printable(target, 100)));
  const auto length = head.find(http::field::content_length);
  if (head.count(http::field::transfer_encoding) != 0 || (length != head.end() && length->value() != "0"))
    return malformed_request("a CONNECT request carries no body");
  return proxy_target{true, {named->host, named->ip_literal}, *named->port, {}};
}

refusal_or<proxy_target> plain_target(const http::request_header<>& head) {
  std::string_view target = view_of(head.target());
  constexpr std::string_view scheme = "http://";
  if (target.size() < scheme.size() || !boost::beast::iequals(target.substr(0, scheme.size()), scheme)) {
    if (target.size() >= 8 && boost::beast::iequals(target.substr(0, 8), "https://"))
      return malformed_request("an https:// URL goes through this proxy by CONNECT");
    if (target.starts_with('/'))
      return malformed_request("a path alone (origin-form): a proxy is asked for a whole URL, GET http://host/path");
    return malformed_request("neither CONNECT nor an http:// URL");
  }
  target.remove_prefix(scheme.size());
  if (target.find('#') != std::string_view::npos) return malformed_request("a URL with a fragment");
  const std::size_t path_at = std::min(target.find_first_of("/?"), target.size());
  const std::string_view authority = target.substr(0, path_at);
  if (authority.find('@') != std::string_view::npos) return malformed_request("a URL with user information");
  const auto named = authority_of(authority);
  if (!named)
    return malformed_request(fmt::format("the URL's host \"{}\" is not host[:port]", printable(authority, 100)));
  proxy_target out{
      false, {named->host, named->ip_literal}, named->port.value_or(80), std::string(target.substr(path_at))};
  if (out.origin_form.empty() || out.origin_form.front() == '?') out.origin_form.insert(0, "/");
  PSYCH_TRY(check_host_field(head, out));
  PSYCH_TRY(check_framing(head));
  return out;
}

/// Fields never sent on: they describe this hop (RFC 9110, 7.6.1), or they are for the proxy.
bool hop_by_hop(std::string_view name) {
  for (const std::string_view hop :
       {"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade", "content-length"})
    if (boost::beast::iequals(name, hop)) return true;
  return name.size() >= 6 && boost::beast::iequals(name.substr(0, 6), "proxy-");
}

/// The fields a Connection header names as this hop's own.
std::vector<std::string_view> named_by_connection(const http::request_header<>& head) {
  std::vector<std::string_view> names;
  const auto [first, last] = head.equal_range(http::field::connection);
  for (auto field = first; field != last; ++field) {
    std::string_view rest = view_of(field->value());
    while (!rest.empty()) {
      const std::size_t comma = std::min(rest.find(','), rest.size());
      std::string_view token = rest.substr(0, comma);
      rest.remove_prefix(std::min(comma + 1, rest.size()));
      while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) token.remove_prefix(1);
      while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
      if (!token.empty()) names.push_back(token);
    }
  }
  return names;
}

}  // namespace

std::string proxy_target::authority() const { return to_string(host_pattern{host.host, false, host.ip_literal, port}); }

refusal_or<proxy_target> read_target(const http::request_header<>& head) {
  if (static_cast<std::size_t>(std::distance(head.begin(), head.end())) > max_request_fields)
    return proxy_refusal{431, proxy_error::http_request_error,
                         fmt::format("a request head of more than {} fields", max_request_fields)};
  if (head.version() != 10 && head.version() != 11) return malformed_request("HTTP/1.0 and HTTP/1.1 only");
  return head.method() == http::verb::connect ? tunnel_target(head) : plain_target(head);
}

std::string asked_authority(std::string_view target) {
  if (const std::size_t scheme = target.find("://"); scheme != std::string_view::npos) target.remove_prefix(scheme + 3);
  target = target.substr(0, target.find_first_of("/?#"));
  if (const std::size_t user = target.rfind('@'); user != std::string_view::npos) target.remove_prefix(user + 1);
  return printable(target, 100);
}

refusal_or<void> check_allowed(const proxy_target& target, const std::vector<host_pattern>& allowed) {
  if (allows(allowed, target.host, target.port)) return boost::outcome_v2::success();
  return proxy_refusal{403, proxy_error::http_request_denied,
                       fmt::format("{} is not on the allowlist", target.authority())};
}

std::string upstream_head(const http::request_header<>& head, const proxy_target& target, const body_framing& framing) {
  const auto connection_names = named_by_connection(head);
  std::string out =
      fmt::format("{} {} HTTP/1.{}\r\n", view_of(head.method_string()), target.origin_form, head.version() % 10);
  for (const auto& field : head) {
    const std::string_view name = view_of(field.name_string());
    const auto named = [name](std::string_view hop) { return boost::beast::iequals(name, hop); };
    if (hop_by_hop(name) || std::ranges::any_of(connection_names, named)) continue;
    out.append(name).append(": ").append(view_of(field.value())).append("\r\n");
  }
  if (framing.chunked)
    out += "Transfer-Encoding: chunked\r\n";
  else if (framing.content_length)
    out += fmt::format("Content-Length: {}\r\n", *framing.content_length);
  out += "Connection: close\r\n\r\n";
  return out;
}

}  // namespace psych::host::egress
