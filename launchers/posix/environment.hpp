#pragma once
// The child's environment and argument vector, built from nothing: the
// child's environment is exactly launch.environment. Nothing of the
// launcher's own environment is inherited, so a credential that reaches the
// worker later still never reaches a program.
#include <map>
#include <string>
#include <vector>

#include "setup_error.hpp"

namespace psych::launcher {

/// An owning, NULL-terminated string vector in the shape execve() takes.
class string_vector {
 public:
  explicit string_vector(std::vector<std::string> strings);
  string_vector(string_vector&&) = default;
  string_vector& operator=(string_vector&&) = default;

  /// Valid for the lifetime of this object; a moved vector keeps its elements where they are.
  [[nodiscard]] char* const* data() const noexcept { return pointers_.data(); }
  [[nodiscard]] const std::vector<std::string>& strings() const noexcept { return strings_; }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

/// "KEY=value" for each entry. A key that is empty or holds '=' or NUL, or a value with NUL,
/// cannot be passed to execve faithfully and is refused at stage "environment".
setup_result<string_vector> build_environment(const std::map<std::string, std::string>& variables);

}  // namespace psych::launcher
