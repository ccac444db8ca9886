#include "egress/proxy_refusal.hpp"

#include <boost/beast/http/status.hpp>
#include <fmt/format.h>

namespace psych::host::egress {

std::string printable(std::string_view text, std::size_t limit) {
  std::string out;
  for (const char c : text.substr(0, limit)) out += c >= 0x20 && c < 0x7f ? c : '?';
  return out;
}

std::string bound_text(std::chrono::milliseconds bound) { return fmt::format("{} ms", bound.count()); }

std::string refusal_response(const proxy_refusal& refusal) {
  const std::string detail = printable(refusal.detail);
  // A structured field's string (RFC 8941): only '"' and '\' need escaping in printable ASCII.
  std::string quoted;
  for (const char c : detail) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  const std::string body = fmt::format("psych egress: refused: {}\n", detail);
  const auto reason = boost::beast::http::obsolete_reason(boost::beast::http::int_to_status(refusal.status));
  return fmt::format(
      "HTTP/1.1 {} {}\r\nProxy-Status: psych; error={}; details=\"{}\"\r\nContent-Type: text/plain; charset=utf-8\r\n"
      "Content-Length: {}\r\nConnection: close\r\n\r\n{}",
      refusal.status, std::string_view(reason.data(), reason.size()), name_of(refusal.error), quoted, body.size(),
      body);
}

}  // namespace psych::host::egress
