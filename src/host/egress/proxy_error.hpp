#pragma once
// Why the egress proxy refused a connection, in RFC 9209's words: the error type of the
// Proxy-Status field it answers with, and of the meters' refusals. docs/network.md, "The proxy".
#include "psych/names.hpp"

namespace psych::host {

/// The RFC 9209 error types the proxy reports, each with its rule of use.
enum class proxy_error {
  /// The request is not one the proxy serves: not HTTP/1.x, neither of its two forms, a malformed
  /// or missing host, a head too large or too slow (400, 408, 431).
  http_request_error,
  /// The request is well formed but the allowlist does not name its destination, or it disagrees
  /// with itself to reach another host: a Host header that names another host than the URL, a TLS
  /// server name (SNI) that is not the CONNECT's host, or none to a name (403, or after a CONNECT's
  /// 200 a TLS alert).
  http_request_denied,
  /// A listed name resolves only to addresses the proxy never connects to on a name's behalf
  /// (address_class.hpp), or the destination is the proxy's own listener (403).
  destination_ip_prohibited,
  /// Resolving the name failed or found no address (502).
  dns_error,
  /// Resolving the name took longer than connect_timeout (504).
  dns_timeout,
  /// Every permitted address refused the connection (502).
  connection_refused,
  /// Connecting failed otherwise: unreachable, reset (502).
  destination_unavailable,
  /// Connecting took longer than connect_timeout (504).
  connection_timeout,
  /// The proxy already serves max_connections (503).
  connection_limit_reached,
  /// After a CONNECT's 200: bytes that are not TLS to port 443, a ClientHello that does not parse or
  /// does not arrive whole within the head timeout and its bound (the tunnel is closed).
  tls_protocol_error,
};

}  // namespace psych::host

namespace psych {
PSYCH_ENUM_NAMES(host::proxy_error, "http_request_error", "http_request_denied", "destination_ip_prohibited",
                 "dns_error", "dns_timeout", "connection_refused", "destination_unavailable", "connection_timeout",
                 "connection_limit_reached", "tls_protocol_error");
}  // namespace psych
