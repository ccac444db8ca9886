#pragma once
// What the seatbelt profile lets this launch's program touch, as canonical host paths (seatbelt
// matches resolved paths: /tmp is /private/tmp there). Reads are denied under the homes, the
// keychains, the per-user temporary folders, the worker's own home, the temp root that holds the
// other executions' directories, and the canary's directory; writes go only to the workspace and
// the temp dir; the interpreter's installation stays readable even under a home.
#include "setup_error.hpp"
#include "psych/protocol/frames.hpp"
#include "seatbelt_profile.hpp"

namespace psych::launcher {

/// Resolves the launch's paths (realpath) before the fork. Fails at stage "seatbelt" naming the
/// path that does not resolve.
setup_result<seatbelt_terms> seatbelt_terms_for(const protocol::launch_frame& launch);

}  // namespace psych::launcher
