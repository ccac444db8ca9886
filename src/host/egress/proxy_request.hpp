#pragma once
// The egress proxy's rules for a request head, pure and apart from the I/O: which of its two forms
// it is (CONNECT host:port, or a plain http:// URL in absolute-form), where it goes, whether the
// allowlist names that, and the head a plain request is sent on with. docs/network.md, "The proxy".
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <boost/beast/http/message.hpp>

#include "egress/proxy_refusal.hpp"
#include "psych/host_pattern.hpp"

namespace psych::host::egress {

/// A request head's header fields beyond which it is refused (431), beside its 16 KiB.
inline constexpr std::size_t max_request_fields = 100;
inline constexpr std::size_t max_request_head_bytes = 16 * 1024;

struct proxy_target {
  bool tunnel = false;  ///< CONNECT; otherwise one plain HTTP request
  canonical_host host;
  std::uint16_t port = 0;
  std::string origin_form;  ///< a plain request's path and query, "/" at least

  /// "example.com:443", "[2001:db8::1]:80": the destination as a refusal names it.
  [[nodiscard]] std::string authority() const;
};

/// The destination of a request head, once the head is one the proxy serves: 400 or 431 when it is
/// not (http_request_error), 403 when its Host header names another host than its URL
/// (http_request_denied).
refusal_or<proxy_target> read_target(const boost::beast::http::request_header<>& head);

/// What a request target that did not parse names of its destination, for the meters: its
/// authority, without a URL's scheme, user information, path or query (which may carry a
/// credential), as printable ASCII of at most 100 characters.
std::string asked_authority(std::string_view target);

/// 403 (http_request_denied) unless the allowlist names the target's host and port.
refusal_or<void> check_allowed(const proxy_target& target, const std::vector<host_pattern>& allowed);

/// How a plain request's body is framed, as the head's parser found it.
struct body_framing {
  bool chunked = false;
  std::optional<std::uint64_t> content_length;
};

/// The head a plain request is sent to its destination with: the request line in origin-form; the
/// client's fields without the hop-by-hop ones (Connection, Keep-Alive, TE, Trailer, Upgrade,
/// Transfer-Encoding, those the Connection field names) and without any Proxy-*; the body's framing
/// stated anew; and Connection: close, since the proxy serves one request per connection.
std::string upstream_head(const boost::beast::http::request_header<>& head, const proxy_target& target,
                          const body_framing& framing);

}  // namespace psych::host::egress
