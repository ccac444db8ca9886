#pragma once
// Base64 (RFC 4648, with padding) for the remote protocol's output chunks: captured bytes are not
// always UTF-8, and a JSON string must be.
#include <optional>
#include <string>
#include <string_view>

namespace psych::host {

std::string base64_encode(std::string_view bytes);
/// nullopt for anything that is not canonical padded base64.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace psych::host
