#pragma once
// TLS ClientHellos made byte by byte, honest or lying: the ClientHello tests' inputs and the hostile
// clients of the proxy's tests. Each length is computed unless a test overrides it to lie.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace egress_test {

inline std::string big_endian(std::size_t value, std::size_t width) {
  std::string out(width, '\0');
  for (std::size_t i = 0; i < width; ++i) out[width - 1 - i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return out;
}

/// `body` with its length in `width` bytes in front.
inline std::string prefixed(const std::string& body, std::size_t width) {
  return big_endian(body.size(), width) + body;
}

inline std::string extension(std::uint16_t type, const std::string& data) {
  return big_endian(type, 2) + prefixed(data, 2);
}

/// A server_name extension's body naming each of `names` as a host name.
inline std::string server_names(const std::vector<std::string>& names) {
  std::string list;
  for (const auto& name : names) list += '\0' + prefixed(name, 2);
  return prefixed(list, 2);
}

struct hello_parts {
  std::optional<std::string> server_name;     ///< nullopt: no server_name extension
  std::vector<std::string> extra_extensions;  ///< whole extensions, after the server name's
  bool extensions = true;                     ///< false: the ClientHello ends after its compression methods
  std::string session_id = std::string(32, 's');
};

/// The ClientHello message (handshake header and body).
inline std::string hello_message(const hello_parts& parts = {}) {
  std::string body = "\x03\x03" + std::string(32, 'r') + prefixed(parts.session_id, 1) +
                     prefixed(std::string("\x13\x01\x13\x02", 4), 2) + prefixed(std::string(1, '\0'), 1);
  if (parts.extensions) {
    std::string extensions;
    if (parts.server_name) extensions += extension(0, server_names({*parts.server_name}));
    extensions += extension(43, std::string("\x02\x03\x04", 3));  // supported_versions: TLS 1.3
    for (const auto& more : parts.extra_extensions) extensions += more;
    body += prefixed(extensions, 2);
  }
  return "\x01" + prefixed(body, 3);
}

/// `message` in handshake records of at most `piece` bytes each.
inline std::string in_records(const std::string& message, std::size_t piece = 16 * 1024) {
  std::string out;
  for (std::size_t at = 0; at < message.size(); at += piece)
    out += "\x16\x03\x01" + prefixed(message.substr(at, piece), 2);
  return out;
}

inline std::string client_hello(const std::optional<std::string>& server_name) {
  hello_parts parts;
  parts.server_name = server_name;
  return in_records(hello_message(parts));
}

}  // namespace egress_test
