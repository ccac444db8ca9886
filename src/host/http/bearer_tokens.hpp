#pragma once
// The credentials of psych's HTTP servers (psych serve, psych mcp --listen): a file of tokens,
// compared in constant time. A presented token is hashed and the digest compared with every entry's
// (CRYPTO_memcmp, no early exit), so neither the time nor the answer says which part of a wrong
// token was wrong.
#include <array>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "psych/result.hpp"

namespace psych::host {

class token_table {
 public:
  /// Reads "<name> <token>" or "<token>" lines; errors name the file and the line, never a token.
  static result<token_table> load(const std::string& path);
  /// The name of the credential `presented` is, if any.
  std::optional<std::string> match(std::string_view presented) const;
  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }

 private:
  struct entry {
    std::string name;
    std::array<unsigned char, 32> digest{};
  };
  std::vector<entry> entries_;
};

/// A server's token file, replaced whole by a reload (SIGHUP) while requests are checked against it.
class bearer_credentials {
 public:
  /// The name of the credential an Authorization header's value presents ("Bearer <token>"), if any.
  std::optional<std::string> authenticate(std::string_view authorization) const;
  void replace(token_table tokens);
  /// Reads the token file again; on an error the tokens held stay.
  result<void> reload(const std::string& path);

 private:
  mutable std::mutex mutex_;
  token_table tokens_;
};

}  // namespace psych::host
