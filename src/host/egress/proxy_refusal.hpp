#pragma once
// How the egress proxy says no: an HTTP status, one of RFC 9209's error types for its Proxy-Status
// field, and words a program's reader understands. docs/network.md, "The proxy".
#include <chrono>
#include <string>
#include <string_view>

#include <boost/outcome/basic_result.hpp>
#include <boost/outcome/policy/terminate.hpp>

#include "egress/proxy_error.hpp"

namespace psych::host::egress {

struct proxy_refusal {
  unsigned status = 0;  ///< the HTTP answer's; 0 after a CONNECT's 200, when none can be given
  proxy_error error = proxy_error::http_request_error;
  std::string detail;
};

template <class T>
using refusal_or = boost::outcome_v2::basic_result<T, proxy_refusal, boost::outcome_v2::policy::terminate>;

/// The refusal as a whole HTTP response: its status, `Proxy-Status: psych; error=<type>;
/// details="<detail>"`, and the text body "psych egress: refused: <detail>", then the connection
/// closes.
std::string refusal_response(const proxy_refusal& refusal);

/// At most `limit` characters of `text` with anything but printable ASCII as '?': a client's words
/// reach a refusal, a Proxy-Status string and the meters only this way.
std::string printable(std::string_view text, std::size_t limit = 200);

/// A bound as a refusal names it: "500 ms".
std::string bound_text(std::chrono::milliseconds bound);

}  // namespace psych::host::egress
