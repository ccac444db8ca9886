#pragma once
// The launch frame as input: checked in full before anything is created, so a
// bad request costs nothing and ends with one `error` frame (exit code 2).
#include "setup_error.hpp"
#include "psych/protocol/frames.hpp"

namespace psych::launcher {

/// Contract version, the isolation level (at most `reachable`, what this launcher can reach),
/// token, limits, paths and ports. Identity and environment are checked where they are built
/// (identity.hpp, environment.hpp). network=allowlist needs a network namespace of the program's
/// own: isolation=isolated's, or the container's the launcher runs in (`network_of_its_own`).
setup_result<void> validate_launch(const protocol::launch_frame& launch, isolation_level reachable,
                                   bool network_of_its_own = false);

/// A prepared sandbox's `narrow`: valid limits, none above what it was launched with.
setup_result<void> validate_narrowing(const sandbox_limits& narrowed, const sandbox_limits& launched);

}  // namespace psych::launcher
