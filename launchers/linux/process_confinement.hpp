#pragma once
// What the PROCESS level's Landlock ruleset lets the program touch. There is no mount boundary at
// this level, so Landlock is the only thing between the program and every host file its uid may
// read: it reads and executes the interpreter's installation and the libraries the loader needs,
// reads /proc, uses the harmless devices, and writes only its workspace and its temp dir. With a
// network grant it also reads the resolver's configuration.
#include "landlock.hpp"
#include "psych/protocol/frames.hpp"

namespace psych::launcher {

/// The paths for this launch, as host paths (the launcher prepares the ruleset before the fork).
/// Inside a container (container_entry.hpp) the root is the image's, not the host's: the program
/// may list it and read its cgroup's limits back, as it does in an ISOLATED root, so that the
/// host can grade the container's boundary from what the child saw.
landlock_paths process_landlock_paths(const protocol::launch_frame& launch, bool inside_container);

}  // namespace psych::launcher
