#pragma once
// Inside a container the launcher inherits nothing from the host: the container runtime gives it
// only stdin, stdout and stderr. It reaches the worker through a Unix socket bind-mounted into the
// container, proves it is the execution's launcher by presenting the token it read on stdin as its
// first line, and receives the contract's descriptors (docs/contract.md, "Channels") over that
// connection with SCM_RIGHTS: the program's stdout and stderr pipes, control and channel. From
// then on it is the same launcher as on the host (docs/container-backend.md).
#include <string_view>

#include "setup_error.hpp"

namespace psych::launcher {

/// The argument that selects this entry: `psych-launch-linux --connect SOCKET`.
inline constexpr std::string_view connect_argument = "--connect";

/// Reads the token from fd 0 (one line, at most 128 bytes), connects to `socket_path`, writes the
/// token and a newline, receives four descriptors (five for network=allowlist: the egress
/// handover), and installs them as fds 1-4 (and 5) with fd 0 on /dev/null: the layout
/// check_inherited_fds() expects. Any other shape of answer fails.
setup_result<void> receive_descriptors(const char* socket_path);

}  // namespace psych::launcher
