#pragma once
// The kernel settings that keep a process that is not root from using user namespaces, read from
// /proc/sys, and which of them explains a failure. Where one does, the error alone (EPERM from
// sethostname inside a namespace that clone() made) would send an operator looking in the wrong
// place. The decision is pure (the files' text in, a sentence out); reading them is a separate step.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "psych/protocol/launch_stage.hpp"

namespace psych::host {

/// Each setting's file as read, or nullopt where this kernel has no such file.
struct userns_settings {
  /// kernel.apparmor_restrict_unprivileged_userns (Ubuntu 23.10+): 1 moves the new namespace of an
  /// unconfined process into a profile with no capabilities; clone() succeeds, the next step fails.
  std::optional<std::string> apparmor_restrict_unprivileged_userns;
  /// kernel.unprivileged_userns_clone (Debian's older switch): 0 refuses clone() itself, EPERM.
  std::optional<std::string> unprivileged_userns_clone;
  /// user.max_user_namespaces: 0 refuses every new user namespace, root's too, ENOSPC.
  std::optional<std::string> max_user_namespaces;
};

/// What failed, and where.
struct userns_failure {
  int error_number = 0;  ///< errno of the call that failed
  bool root = false;     ///< whether the process that tried has CAP_SYS_ADMIN on the host (euid 0)
  std::string_view launcher;  ///< the launcher that makes the namespaces, named in the remedy
};

/// The settings that explain `failure`, each named with its value and its remedy, joined by "; ";
/// nullopt when none does (every file absent or permitting, or an errno none of them gives).
std::optional<std::string> userns_restriction(const userns_settings& settings, const userns_failure& failure);

/// Whether a launch that failed at `stage` failed making or entering its namespaces (the calls a
/// restriction on user namespaces refuses), rather than at a step they do not touch.
bool namespace_setup_stage(protocol::launch_stage stage);

/// The three files below `proc_sys`: the kernel's /proc/sys, or a test's copy of its layout.
userns_settings read_userns_settings(const std::filesystem::path& proc_sys = "/proc/sys");

}  // namespace psych::host
