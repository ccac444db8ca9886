#pragma once
// A hostile client for the service: raw bytes on a TLS (or plain) connection, every step bounded in
// time. Beast writes and parses the well-formed requests and responses; the bytes a slowloris or an
// endless body sends are the test's own. Kept apart so that only raw_client.cpp compiles Beast.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remote_test {

using header_list = std::vector<std::pair<std::string, std::string>>;

struct raw_response {
  unsigned status = 0;
  std::string content_type;
  std::string www_authenticate;
  std::string retry_after;
  std::string body;
  header_list headers;  ///< every field, as it came
  /// The first field of that name (case-insensitive); empty when there is none.
  [[nodiscard]] std::string header(std::string_view name) const;
};

class raw_connection {
 public:
  /// Connects to 127.0.0.1:port and, for tls, handshakes (the peer is not verified: this client
  /// tests the service, not the other way round). Null, with why, on failure.
  static std::unique_ptr<raw_connection> open(std::uint16_t port, bool tls, std::string* why = nullptr);
  ~raw_connection();
  raw_connection(const raw_connection&) = delete;
  raw_connection& operator=(const raw_connection&) = delete;

  /// Writes the bytes; false when the peer has closed or the write did not finish in time.
  bool send(std::string_view bytes, double timeout_seconds = 5);
  /// Writes a request (Beast serializes it, with Content-Length for a body).
  bool send_request(const std::string& method, const std::string& target, const header_list& headers,
                    const std::string& body, double timeout_seconds = 5);
  /// Reads one response (a body of at most 64 MiB); nullopt, with why, on failure or timeout.
  std::optional<raw_response> read_response(double timeout_seconds, std::string* why = nullptr);
  /// Reads a response's header only (its `body` empty): the body is then read by read_body_some,
  /// as it comes (a stream).
  std::optional<raw_response> read_response_header(double timeout_seconds, std::string* why = nullptr);
  /// The next bytes of that response's body, as many as have come; an empty string once the body
  /// has ended (`ended` true). nullopt, with why, on failure or when nothing came in time.
  std::optional<std::string> read_body_some(double timeout_seconds, bool* ended, std::string* why = nullptr);
  /// Reads (and drops) whatever arrives until the peer closes the connection: true when it did within
  /// the time, false when it was still open when the time ran out.
  bool closed_within(double timeout_seconds);

 private:
  struct impl;
  explicit raw_connection(std::unique_ptr<impl> state);
  std::unique_ptr<impl> impl_;
};

/// One request on a fresh connection: its response, or nullopt (with why).
std::optional<raw_response> raw_request(std::uint16_t port, const std::string& method, const std::string& target,
                                        const header_list& headers, const std::string& body = {},
                                        std::string* why = nullptr, double timeout_seconds = 10);

}  // namespace remote_test
