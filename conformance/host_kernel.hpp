#pragma once
// What the host's kernel offers, asked directly by the test (never through the code under test),
// for cases whose promised outcome depends on it.
#include <sys/syscall.h>
#include <unistd.h>

namespace conformance {

/// The Landlock ABI this kernel offers; 0 when Landlock is absent or disabled. The launcher
/// applies Landlock at both levels wherever this is at least 1.
inline int host_landlock_abi() {
  constexpr long landlock_create_ruleset = 444;  // the same number on every architecture but alpha
  constexpr unsigned version_flag = 1;           // LANDLOCK_CREATE_RULESET_VERSION
  const long abi = ::syscall(landlock_create_ruleset, nullptr, 0, version_flag);
  return abi > 0 ? static_cast<int>(abi) : 0;
}

/// Whether the test runs as root (a root worker gives each child a uid of its own).
inline bool is_root() { return ::geteuid() == 0; }

}  // namespace conformance
