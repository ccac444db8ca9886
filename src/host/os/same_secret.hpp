#pragma once
// Comparing a secret a connection presents with the one the host gave out.
#include <cstddef>
#include <string_view>

#ifndef _WIN32
#include <openssl/crypto.h>
#endif

namespace psych::host {

/// Equal in time independent of where they differ, so that timing tells a guesser nothing. The
/// secret's length is no secret. OpenSSL's CRYPTO_memcmp where psych_host links OpenSSL; on
/// Windows, where it links none (only psych::remote's TLS does) and the system offers no such
/// compare, every byte is folded into one difference that the compiler must read back through a
/// volatile, so it can neither stop at the first mismatch nor skip the loop.
inline bool same_secret(std::string_view presented, std::string_view secret) {
  if (presented.size() != secret.size()) return false;
#ifdef _WIN32
  volatile unsigned char difference = 0;
  for (std::size_t i = 0; i < secret.size(); ++i)
    difference = static_cast<unsigned char>(difference | (static_cast<unsigned char>(presented[i]) ^ static_cast<unsigned char>(secret[i])));
  return difference == 0;
#else
  return CRYPTO_memcmp(presented.data(), secret.data(), secret.size()) == 0;
#endif
}

}  // namespace psych::host
