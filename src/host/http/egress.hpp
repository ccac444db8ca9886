#pragma once
// The egress seam: every HTTP request a binding source sends (an MCP server over Streamable HTTP,
// an A2A peer, an HTTP tool) leaves through here. One client reaches one declared origin and
// nothing else; https is required unless the origin is loopback; a redirect is followed only
// within the origin (and only for GET and HEAD, so a request with effects is never sent twice);
// the whole exchange, connection to last byte, ends by one deadline whatever the peer does; the
// response is bounded as its bytes arrive and handed over in chunks, never held whole unasked.
// Request headers (the credential) never appear in an error. docs/egress.md.
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/outcome/basic_result.hpp>
#include <boost/outcome/policy/terminate.hpp>

#include "http/http_link.hpp"
#include "psych/names.hpp"
#include "psych/result.hpp"

namespace psych::host {

/// Why an exchange produced no response. `sent` says whether any byte of the request may have
/// reached the peer: a call with effects that failed after that is of unknown outcome.
enum class egress_error_kind {
  /// The request would leave the declared origin: another origin, http:// off loopback, or a
  /// redirect to another origin (or from https to http). Nothing was sent to it.
  refused,
  /// Resolving, connecting or the TLS handshake failed (a certificate that does not verify
  /// included). Nothing was sent.
  unreachable,
  /// The deadline passed.
  timeout,
  /// The stop token was requested.
  cancelled,
  /// The response's header or body passed its bound.
  too_large,
  /// What came back is not HTTP, or a redirect without a usable Location, or too many redirects.
  malformed,
  /// The connection failed after the request was written (or while it was).
  connection_lost,
};
}  // namespace psych::host

namespace psych {
PSYCH_ENUM_NAMES(host::egress_error_kind, "refused", "unreachable", "timeout", "cancelled", "too_large", "malformed",
                 "connection_lost");
}  // namespace psych

namespace psych::host {

struct egress_error {
  egress_error_kind kind;
  std::string detail;  ///< never a request header; peer text only through peer_excerpt
  bool sent = false;

  [[nodiscard]] std::string message() const {
    std::string text{name_of(kind)};
    if (!detail.empty()) text.append(": ").append(detail);
    return text;
  }
};

template <class T>
using egress_result = boost::outcome_v2::basic_result<T, egress_error, boost::outcome_v2::policy::terminate>;

/// An absolute http(s) URL: its origin and the request target (path and query, "/" when empty).
/// Refused: another scheme, user information ("user:pass@"), a fragment, spaces or control bytes.
struct http_url {
  service_endpoint origin;
  std::string target = "/";
};
result<http_url> parse_http_url(std::string_view url);

/// "https://host:port" (brackets around an IPv6 address): how an origin is named in messages.
std::string origin_text(const service_endpoint& origin);

/// `text` with every occurrence of `secret` (when not empty) replaced by "[credential]": for any
/// peer text a source quotes, since a hostile peer may echo what it was sent.
std::string redact(std::string text, std::string_view secret);

struct egress_options {
  /// PEM file of the CA (or self-signed certificate) the peer's certificate must chain to;
  /// default: the system's trust store. The host name is always verified.
  std::optional<std::string> ca_file;
  /// http:// to a host that is not loopback: only when the network in between is trusted.
  bool allow_insecure_http = false;
};

struct egress_request {
  std::string method = "GET";  ///< any token: GET, POST, DELETE, PATCH...
  std::string target = "/";    ///< path and query, at the client's origin
  std::vector<std::pair<std::string, std::string>> headers;  ///< Host is added; Content-Length too
  std::string body;
};

struct egress_response_head {
  unsigned status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  ///< at most 64 fields, 16 KiB
  /// The first field of that name (case-insensitive), or empty.
  [[nodiscard]] std::string_view header(std::string_view name) const;
};

struct egress_response {
  egress_response_head head;
  std::string body;
};

struct egress_limits {
  /// The whole exchange (each redirect's too) ends by then.
  std::chrono::steady_clock::time_point deadline;
  /// Bytes of the response body; one byte more is too_large, the connection closed at once.
  std::size_t max_body_bytes = 1 << 20;
  /// Same-origin redirects of a GET or HEAD; past this many, malformed.
  int max_redirects = 5;
};

/// Called with each piece of the body as it arrives (at most 8 KiB each); returns false to stop
/// reading (the connection is closed and the exchange succeeds with what was read).
using egress_body_sink = std::function<bool(std::string_view chunk)>;

/// One client per origin. Thread safety: exchange() may be called from several threads at once;
/// each exchange runs on the calling thread with an event loop of its own, on a connection of its
/// own (a TLS session is resumed when it can be).
class egress_client {
 public:
  /// sandbox_setup for a URL that is not one, or http:// to a host that is not loopback (unless
  /// allowed), or a CA file that cannot be read. `base_url` may have a path: origin() is its origin
  /// and base_target() its path. Nothing is sent.
  static result<std::unique_ptr<egress_client>> create(std::string_view base_url, egress_options options = {});
  ~egress_client();
  egress_client(const egress_client&) = delete;
  egress_client& operator=(const egress_client&) = delete;

  [[nodiscard]] const service_endpoint& origin() const noexcept;
  /// The path of the base URL ("/" when none), e.g. "/mcp".
  [[nodiscard]] const std::string& base_target() const noexcept;

  /// Resolves an absolute URL or a target against the origin: refused when it names another origin.
  [[nodiscard]] egress_result<std::string> target_of(std::string_view url_or_target) const;

  /// One request and its response head; the body goes to `sink` as it arrives. A 3xx to a GET or
  /// HEAD within the origin is followed; one to another origin is refused (its status and the
  /// origin it named are in the detail); the 3xx of any other method is returned as it is.
  egress_result<egress_response_head> exchange(const egress_request& request, const egress_limits& limits,
                                               std::stop_token stop, const egress_body_sink& sink);
  /// The same, with the body collected (bounded by limits.max_body_bytes).
  egress_result<egress_response> fetch(const egress_request& request, const egress_limits& limits,
                                       std::stop_token stop);

 private:
  struct state;
  explicit egress_client(std::unique_ptr<state> s);
  std::unique_ptr<state> state_;
};

}  // namespace psych::host
