#include "egress/client_hello.hpp"

#include <cstdint>

namespace psych::host::egress {

namespace {

constexpr std::uint8_t handshake_record = 0x16;
constexpr std::uint8_t client_hello_message = 1;
constexpr std::size_t record_header = 5;
constexpr std::size_t largest_record = 16 * 1024;
constexpr std::size_t message_header = 4;

constexpr std::uint8_t byte_at(std::string_view bytes, std::size_t at) { return static_cast<std::uint8_t>(bytes[at]); }

client_hello_scan malformed(std::string_view why) { return {hello_state::malformed, std::nullopt, why}; }

/// Reads TLS's big-endian numbers and length-prefixed vectors, refusing to pass the end.
class tls_reader {
 public:
  explicit tls_reader(std::string_view bytes) : rest_(bytes) {}

  [[nodiscard]] bool done() const { return rest_.empty(); }

  bool take(std::size_t count, std::string_view& out) {
    if (rest_.size() < count) return false;
    out = rest_.substr(0, count);
    rest_.remove_prefix(count);
    return true;
  }

  bool number(std::size_t width, std::size_t& out) {
    std::string_view digits;
    if (!take(width, digits)) return false;
    out = 0;
    for (std::size_t i = 0; i < width; ++i) out = out << 8 | byte_at(digits, i);
    return true;
  }

  /// A vector with its length in `width` bytes in front (TLS's opaque<..>).
  bool vector(std::size_t width, std::string_view& out) {
    std::size_t count = 0;
    return number(width, count) && take(count, out);
  }

 private:
  std::string_view rest_;
};

/// The host_name of a server_name extension's body (RFC 6066, 3): a list of one name per type.
client_hello_scan read_server_name(std::string_view extension) {
  tls_reader outer(extension);
  std::string_view list;
  if (!outer.vector(2, list) || !outer.done() || list.empty())
    return malformed("a server_name extension whose list does not fill it");
  tls_reader entries(list);
  client_hello_scan found{hello_state::complete, std::nullopt, {}};
  while (!entries.done()) {
    std::size_t type = 0;
    std::string_view name;
    if (!entries.number(1, type) || !entries.vector(2, name)) return malformed("a server name runs past its list");
    if (type != 0) continue;  // not a host name: no other type is defined
    if (found.server_name) return malformed("two host names in one server_name extension");
    if (name.empty()) return malformed("an empty server name");
    found.server_name = std::string(name);
  }
  return found;
}

/// A ClientHello's body (RFC 8446, 4.1.2; RFC 5246, 7.4.1.2), up to its extensions.
client_hello_scan read_client_hello(std::string_view body) {
  tls_reader hello(body);
  std::string_view skipped;
  if (!hello.take(2 + 32, skipped)) return malformed("a ClientHello shorter than its version and random");
  if (!hello.vector(1, skipped) || skipped.size() > 32) return malformed("a ClientHello's session id does not parse");
  if (!hello.vector(2, skipped) || skipped.size() < 2 || skipped.size() % 2 != 0)
    return malformed("a ClientHello's cipher suites do not parse");
  if (!hello.vector(1, skipped) || skipped.empty())
    return malformed("a ClientHello's compression methods do not parse");
  if (hello.done()) return {hello_state::complete, std::nullopt, {}};  // no extensions at all (TLS 1.2 allows it)
  std::string_view extensions;
  if (!hello.vector(2, extensions) || !hello.done())
    return malformed("a ClientHello's extensions do not fill it exactly");
  tls_reader each(extensions);
  client_hello_scan found{hello_state::complete, std::nullopt, {}};
  bool seen_server_name = false;
  while (!each.done()) {
    std::size_t type = 0;
    std::string_view data;
    if (!each.number(2, type) || !each.vector(2, data))
      return malformed("an extension runs past the ClientHello's end");
    if (type != 0) continue;
    if (seen_server_name) return malformed("two server_name extensions");
    seen_server_name = true;
    found = read_server_name(data);
    if (found.state != hello_state::complete) return found;
  }
  return found;
}

}  // namespace

client_hello_scan scan_client_hello(std::string_view bytes) {
  if (bytes.empty()) return {};
  if (byte_at(bytes, 0) != handshake_record) return {hello_state::not_tls, std::nullopt, {}};
  // The handshake messages the records carry, joined, until the ClientHello's length is there.
  std::string joined;
  std::size_t at = 0;
  std::size_t message_size = 0;  // 0: not known yet
  while (message_size == 0 || joined.size() < message_size) {
    if (bytes.size() - at < record_header) return {};
    const std::size_t length = std::size_t{byte_at(bytes, at + 3)} << 8 | byte_at(bytes, at + 4);
    if (byte_at(bytes, at) != handshake_record) return malformed("another record before the ClientHello ended");
    if (byte_at(bytes, at + 1) != 3) return malformed("a record of no TLS version");
    if (length == 0) return malformed("an empty handshake record");
    if (length > largest_record) return malformed("a record longer than TLS allows");
    if (bytes.size() - at - record_header < length) return {};
    joined.append(bytes.substr(at + record_header, length));
    at += record_header + length;
    if (message_size == 0 && joined.size() >= message_header) {
      if (byte_at(joined, 0) != client_hello_message)
        return malformed("a first handshake message that is no ClientHello");
      const std::size_t body =
          std::size_t{byte_at(joined, 1)} << 16 | std::size_t{byte_at(joined, 2)} << 8 | byte_at(joined, 3);
      if (message_header + body + record_header > client_hello_bound)
        return malformed("a ClientHello longer than one TLS record");
      message_size = message_header + body;
    }
  }
  return read_client_hello(std::string_view(joined).substr(message_header, message_size - message_header));
}

}  // namespace psych::host::egress
