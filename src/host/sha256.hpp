#pragma once
// SHA-256 as 64 lowercase hex digits (OpenSSL EVP): the BlobStore's content addresses and the
// published Version hash.
#include <string>
#include <string_view>

#include "psych/result.hpp"

namespace psych::host {

/// Fails (system_call_failed) only if OpenSSL's digest itself fails.
result<std::string> sha256_hex(std::string_view bytes);

}  // namespace psych::host
