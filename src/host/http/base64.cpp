#include "http/base64.hpp"

#include <openssl/evp.h>

namespace psych::host {

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  if (bytes.empty()) return out;
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  if (text.empty()) return std::string{};
  std::string out(3 * (text.size() / 4), '\0');
  // EVP_DecodeBlock counts the padding's zero bytes and skips leading and trailing whitespace;
  // the '=' are taken off here, and whitespace is refused by the size check above only when it
  // changes the length, so it is refused explicitly.
  for (const char c : text)
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f') return std::nullopt;
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  std::size_t padding = 0;
  if (text.back() == '=') ++padding;
  if (text.size() >= 2 && text[text.size() - 2] == '=') ++padding;
  out.resize(static_cast<std::size_t>(n) - padding);
  return out;
}

}  // namespace psych::host
