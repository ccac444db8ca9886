#pragma once
// What a network=allowlist execution's connections through psych's egress proxy did
// (docs/network.md): the execution's network meters, in the result beside its binding meters.
#include <cstdint>
#include <string>
#include <vector>

#include <boost/hana/adapt_struct.hpp>

namespace psych {

/// One connection the proxy refused or ended, in the words of RFC 9209's Proxy-Status error types.
struct egress_refusal {
  /// As the program named it: the CONNECT's host, or the URL's. A request refused before its
  /// destination could be read (malformed, or a Host that disagrees with its URL) gives its target
  /// as sent, and port 0.
  std::string host;
  std::int64_t port = 0;
  std::string reason;   ///< "destination_ip_prohibited", "http_request_denied", "tls_protocol_error", ...
  std::string detail;   ///< the proxy's own words: which rule, which address class
  friend bool operator==(const egress_refusal&, const egress_refusal&) = default;
};

struct egress_report {
  std::int64_t connections_allowed = 0;  ///< reached a listed host
  std::int64_t connections_refused = 0;  ///< refused before reaching anything
  std::int64_t connections_cut = 0;      ///< allowed, then ended by a bound (idle, lifetime, bytes)
  std::int64_t bytes_sent = 0;           ///< from the program to the hosts it reached
  std::int64_t bytes_received = 0;       ///< from those hosts to the program
  std::vector<egress_refusal> refusals;  ///< the latest, at most 32
  std::int64_t refusals_omitted = 0;     ///< refused beyond those listed
  friend bool operator==(const egress_report&, const egress_report&) = default;
};

}  // namespace psych

BOOST_HANA_ADAPT_STRUCT(psych::egress_refusal, host, port, reason, detail);
BOOST_HANA_ADAPT_STRUCT(psych::egress_report, connections_allowed, connections_refused, connections_cut, bytes_sent,
                        bytes_received, refusals, refusals_omitted);
