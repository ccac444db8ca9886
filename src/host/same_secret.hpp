#pragma once
// Comparing a secret a connection presents with the one the host gave out.
#include <string_view>

#include <openssl/crypto.h>

namespace psych::host {

/// Equal in time independent of where they differ (OpenSSL's CRYPTO_memcmp), so that timing tells a
/// guesser nothing. The secret's length is no secret.
inline bool same_secret(std::string_view presented, std::string_view secret) {
  return presented.size() == secret.size() && CRYPTO_memcmp(presented.data(), secret.data(), secret.size()) == 0;
}

}  // namespace psych::host
