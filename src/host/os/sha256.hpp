#pragma once
// SHA-256 as 64 lowercase hex digits (OpenSSL EVP; CNG on Windows): the BlobStore's content addresses and the
// published Version hash.
#include <string>
#include <string_view>

#include "psych/result.hpp"

namespace psych::host {

/// Fails (system_call_failed) only if the digest itself fails (OpenSSL's, or CNG's on Windows).
result<std::string> sha256_hex(std::string_view bytes);

}  // namespace psych::host
