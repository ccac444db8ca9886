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
  /// The strongest grade each guarantee can get there (sandbox_result::strongest_grades).
  guarantee_grades strongest = every_guarantee_enforced;
};

/// The spec's honest limits per platform, as grades no execution there can exceed. macOS: no
/// memory cap CPython respects, and a seatbelt profile one canary cannot prove (docs/macos-launcher.md).
/// Windows: no per-process file size cap, no filesystem boundary, no other account
/// (docs/windows-launcher.md).
inline constexpr guarantee_grades strongest_on_macos = [] {
  auto grades = every_guarantee_enforced;
  grades.filesystem = enforcement::unverified;
  grades.memory = enforcement::unavailable;
  return grades;
}();
inline constexpr guarantee_grades strongest_on_windows = [] {
  auto grades = every_guarantee_enforced;
  grades.filesystem = enforcement::unavailable;
  grades.identity = enforcement::unavailable;
  grades.file_size = enforcement::unavailable;
  return grades;
}();

inline constexpr local_backend_kind local_backend_kinds[] = {
    {"linux-process", isolation_level::process, "Linux", "psych-launch-linux"},
    {"linux-namespaces", isolation_level::isolated, "Linux", "psych-launch-linux"},
    {"macos-process", isolation_level::process, "macOS", "psych-launch-macos", strongest_on_macos},
    {"windows-process", isolation_level::process, "Windows", "psych-launch-windows", strongest_on_windows},
};

/// The kind of that name; every_guarantee_enforced's for a name that is none of them.
constexpr guarantee_grades strongest_grades_of(std::string_view backend) noexcept {
  for (const auto& kind : local_backend_kinds)
    if (kind.name == backend) return kind.strongest;
  return every_guarantee_enforced;
}

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
