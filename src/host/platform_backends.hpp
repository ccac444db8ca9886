#pragma once
// Every local backend psych has a launcher for, on whichever platform runs it, so that
// detect_local_backends() lists the same rows everywhere and says of another platform's backend
// why it is not available here, instead of leaving it out.
#include <string_view>
#include <vector>

#include "psych/host/sandbox.hpp"

namespace psych::host {

struct local_backend_kind {
  std::string_view name;
  isolation_level isolation;
  std::string_view platform;  ///< "Linux", "macOS", "Windows"
  std::string_view launcher;  ///< the launcher executable that runs it
};

inline constexpr local_backend_kind local_backend_kinds[] = {
    {"linux-process", isolation_level::process, "Linux", "psych-launch-linux"},
    {"linux-namespaces", isolation_level::isolated, "Linux", "psych-launch-linux"},
    {"macos-process", isolation_level::process, "macOS", "psych-launch-macos"},
    {"windows-process", isolation_level::process, "Windows", "psych-launch-windows"},
};

/// The platform this host is, as local_backend_kinds names it; "" for one psych has no launcher for.
constexpr std::string_view host_platform() noexcept {
#if defined(__linux__)
  return "Linux";
#elif defined(__APPLE__)
  return "macOS";
#elif defined(_WIN32)
  return "Windows";
#else
  return "";
#endif
}

/// The name of this platform's launcher executable ("psych-launch-linux"); "" where there is none.
constexpr std::string_view host_launcher_name() noexcept {
  for (const auto& kind : local_backend_kinds)
    if (kind.platform == host_platform()) return kind.launcher;
  return "";
}

/// A row for each backend of another platform: not available, and why.
std::vector<backend_info> other_platforms_backends();

}  // namespace psych::host
