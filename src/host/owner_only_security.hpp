#pragma once
// Windows only: security attributes with a protected DACL that grants the worker's own account and
// SYSTEM alone, "D:P(A;OICI;FA;;;<the worker's SID>)(A;OICI;FA;;;SY)", inherited by what is made
// inside a directory made with it: what mode 0700 (or 0600 for a file) is on POSIX. Handles opened
// with it are not inheritable. Used for the execution's directories and the run log's file.
#include <windows.h>

#include <string>

namespace psych::host {

class owner_only_security {
 public:
  owner_only_security();
  ~owner_only_security();
  owner_only_security(const owner_only_security&) = delete;
  owner_only_security& operator=(const owner_only_security&) = delete;

  /// Empty, or why the descriptor could not be made ("<call>(<what>): <the system's words>"); the
  /// attributes then carry no descriptor, and must not be used for something meant to be private.
  [[nodiscard]] const std::string& error() const noexcept { return error_; }
  [[nodiscard]] SECURITY_ATTRIBUTES* get() noexcept { return &attributes_; }

 private:
  PSECURITY_DESCRIPTOR descriptor_ = nullptr;
  SECURITY_ATTRIBUTES attributes_{};
  std::string error_;
};

}  // namespace psych::host
