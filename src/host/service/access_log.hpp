#pragma once
// The sandbox service's access log: one JSON object a line per request, with who asked (the
// credential's name, never its token), what for, and how it ended; never a program's text.
#include <functional>
#include <string>
#include <string_view>

namespace psych::host {

/// One line of the access log.
struct access_record {
  std::string time;
  std::string peer;
  /// The client a trusted proxy says it forwards (its X-Forwarded-For), or "" for another peer.
  std::string forwarded_for;
  std::string method;
  std::string path;
  unsigned status = 0;
  std::string client;        ///< the credential's name, never the token
  std::string tenant;
  std::string outcome;       ///< for an execution: "ok", its failure kind, or why it did not run
  double duration_ms = 0;
};

/// Now in UTC, to the millisecond: 2024-05-01T12:00:00.000Z.
std::string utc_now();

/// The client a trusted proxy names: the last address of its X-Forwarded-For (each proxy appends
/// the peer it saw, so only the last one is the trusted proxy's own word), or "invalid" when that is
/// not an IP address (never the raw text, which came from a client: the log stays parseable).
std::string forwarded_client(std::string_view header);

/// Writes `record` as one line to `sink`, or to standard error when there is none.
void write_access_log(const std::function<void(std::string_view)>& sink, const access_record& record);

}  // namespace psych::host
