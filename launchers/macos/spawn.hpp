#pragma once
// The PROCESS level's child on macOS: the shared first steps (child_start.hpp), a check that the
// launcher still runs, the workspace, the seatbelt profile, then the exec.
#include <string>

#include "child_start.hpp"
#include "identity.hpp"

namespace psych::launcher {

/// What the child gets on macOS.
struct child_plan {
  child_basics basics;  ///< the bootstrap is an unlinked read-only file (bootstrap_fd.hpp)
  std::string profile;  ///< the seatbelt profile (seatbelt_profile.hpp)
};

/// Forks and sets the child up; returns once the exec succeeded, or with the child's own setup
/// error after the child was reaped.
setup_result<spawned> spawn(const child_plan& plan);

}  // namespace psych::launcher
