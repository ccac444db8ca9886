#pragma once
// The server name (SNI) a TLS client asks for, read from the first bytes it sends into a CONNECT
// tunnel, so the proxy can hold it to the host the CONNECT named. Pure; reads only what it is
// given and checks every length against what is left before it trusts it. A ClientHello split over
// several records is joined; one that does not parse is malformed, never guessed at.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace psych::host::egress {

/// How many of a client's first bytes the proxy reads for its ClientHello: the largest record TLS
/// allows (16 KiB) with its header. A ClientHello that needs more is refused.
inline constexpr std::size_t client_hello_bound = 16 * 1024 + 5;

enum class hello_state {
  need_more,  ///< a prefix of a ClientHello: read on (the caller bounds how far)
  not_tls,    ///< the first byte is not a TLS handshake record's
  malformed,  ///< handshake records, but no ClientHello that parses (`problem` says why)
  complete,   ///< a whole ClientHello; `server_name` is its host name, if it names one
};

struct client_hello_scan {
  hello_state state = hello_state::need_more;
  std::optional<std::string> server_name;  ///< raw bytes, as sent: the caller canonicalizes them
  std::string_view problem;                ///< static text
};

client_hello_scan scan_client_hello(std::string_view bytes);

}  // namespace psych::host::egress
