#include "http/bearer_tokens.hpp"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <fstream>
#include <sstream>

#include <boost/beast/core/string.hpp>
#include <fmt/format.h>

namespace psych::host {
namespace {

std::array<unsigned char, 32> digest_of(std::string_view text) {
  std::array<unsigned char, 32> out{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), out.data());
  return out;
}

}  // namespace

result<token_table> token_table::load(const std::string& path) {
  std::ifstream file(path);
  if (!file) return fail_with(error_kind::unreadable_file, fmt::format("the token file {} cannot be read", path));
  token_table table;
  std::string line;
  std::size_t number = 0;
  while (std::getline(file, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::istringstream words(line);
    std::string first, second, extra;
    words >> first >> second >> extra;
    if (first.empty() || first.starts_with('#')) continue;
    if (!extra.empty())
      return fail_with(error_kind::invalid_argument,
                     fmt::format("the token file {}, line {}: expected \"<name> <token>\" or \"<token>\"", path, number));
    const bool named = !second.empty();
    table.entries_.push_back({.name = named ? first : fmt::format("line-{}", number),
                              .digest = digest_of(named ? second : first)});
  }
  if (table.entries_.empty())
    return fail_with(error_kind::invalid_argument, fmt::format("the token file {} has no token", path));
  return table;
}

std::optional<std::string> token_table::match(std::string_view presented) const {
  const auto digest = digest_of(presented);
  const entry* found = nullptr;
  for (const auto& candidate : entries_)
    if (CRYPTO_memcmp(candidate.digest.data(), digest.data(), digest.size()) == 0 && !found) found = &candidate;
  if (!found) return std::nullopt;
  return found->name;
}

std::optional<std::string> bearer_credentials::authenticate(std::string_view authorization) const {
  // The scheme is case-insensitive (RFC 7235); the token is not.
  constexpr std::string_view scheme = "bearer ";
  if (authorization.size() <= scheme.size() || !boost::beast::iequals(authorization.substr(0, scheme.size()), scheme))
    return std::nullopt;
  const std::string_view presented = authorization.substr(scheme.size());
  std::lock_guard lock(mutex_);
  return tokens_.match(presented);
}

void bearer_credentials::replace(token_table tokens) {
  std::lock_guard lock(mutex_);
  tokens_ = std::move(tokens);
}

result<void> bearer_credentials::reload(const std::string& path) {
  PSYCH_TRY(auto tokens, token_table::load(path));
  replace(std::move(tokens));
  return success();
}

}  // namespace psych::host
