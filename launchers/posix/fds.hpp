#pragma once
// File descriptors (docs/contract.md, "Channels"): the host hands the launcher
// 0 /dev/null, 1 stdout, 2 stderr, 3 control, 4 channel. The child gets 0-2
// as they are, the channel as its fd 3 and the sealed bootstrap memfd as its
// fd 4 (which the bootstrap loader closes before anything else runs), and
// nothing else survives exec.
#include "setup_error.hpp"

namespace psych::launcher {

inline constexpr int control_fd = 3;
inline constexpr int channel_fd = 4;
/// Where the bootstrap finds the channel.
inline constexpr int child_channel_fd = 3;
/// Where the bootstrap loader finds the bootstrap (bootstrap_fd.hpp).
inline constexpr int child_bootstrap_fd = 4;

/// Before anything else: fds 0-4 must all be open, or the host broke the contract.
setup_result<void> check_inherited_fds();

/// In the child: the channel moves to fd 3 (replacing control), the bootstrap memfd (an fd above
/// 4) to fd 4 (replacing the channel's old place), and every fd from 5 up is marked close-on-exec.
/// Marked rather than closed so the exec-status pipe stays open up to the exec itself, and still
/// nothing else crosses into the interpreter.
setup_result<void> arrange_child_fds(int bootstrap);

/// Marks every open descriptor from `first` up close-on-exec: close_range where the kernel has
/// it, else mark_listed_close_on_exec_from.
setup_result<void> mark_close_on_exec_from(int first);

/// The same through the listing of /dev/fd, one fcntl() per open descriptor: for a kernel without
/// close_range (macOS), and testable where there is one.
setup_result<void> mark_listed_close_on_exec_from(int first);

/// In the launcher after the fork: it drops its copy of the channel (so the host sees EOF when
/// the child's tree has gone) and points its own 1 and 2 at /dev/null, as it never writes there
/// and must not keep the program's output pipes open after the program ends.
setup_result<void> detach_launcher_fds();

}  // namespace psych::launcher
