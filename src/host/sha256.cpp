#include "sha256.hpp"

#include <array>

#include <openssl/evp.h>

namespace psych::host {

result<std::string> sha256_hex(std::string_view bytes) {
  std::array<unsigned char, 32> digest{};
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest.data(), &length, EVP_sha256(), nullptr) != 1 ||
      length != digest.size())
    return failure(error_kind::system_call_failed, "EVP_Digest(SHA-256) failed");
  constexpr std::string_view digits = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * digest.size());
  for (const unsigned char byte : digest) {
    hex.push_back(digits[byte >> 4]);
    hex.push_back(digits[byte & 0xf]);
  }
  return hex;
}

}  // namespace psych::host
