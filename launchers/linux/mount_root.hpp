#pragma once
// The ISOLATED filesystem: pivot_root into a fresh, minimal root, never chroot alone. Built by
// the sandbox's init inside its own mount namespace, so every mount here dies with it and the
// host's mount table never changes.
//
//   /                  tmpfs, read-only once built
//   <prefix>, /usr/lib read-only binds of the interpreter's prefix and the libraries under it
//   /lib, /lib64, ...  the host's merged-/usr symlinks, or read-only binds where they are real
//   /etc/ld.so.cache   read-only bind (the loader's index; nothing else of /etc)
//   /workspace         the execution's workspace, read-write, the working directory
//   /tmp               tmpfs, size-capped, counted by the memory cgroup
//   /proc              the new pid namespace's own proc
//   /dev               tmpfs with null, zero, full, random and urandom bound from the host
//   /sys/fs/cgroup/... the execution's own cgroup directories, read-only (limits read back)
#include <cstdint>
#include <string>
#include <vector>

#include "setup_error.hpp"

namespace psych::launcher {

inline constexpr const char* sandbox_workspace = "/workspace";
inline constexpr const char* sandbox_tmp = "/tmp";

/// A host directory and where it appears inside.
struct bind_target {
  std::string host;
  std::string inside;
};

struct root_plan {
  std::string mount_point;  ///< an empty host directory of this execution; the new root is mounted on it
  std::string interpreter;  ///< the interpreter, as the launch named it
  std::string workspace;    ///< the host workspace
  std::vector<bind_target> cgroup_dirs;
  std::int64_t tmp_bytes = 64 << 20;
  std::int64_t tmp_inodes = 16384;
};

/// What the root holds, as the names directly under "/" (the grader compares the child's view).
/// Computed in the launcher from the plan and the host's layout.
std::vector<std::string> root_entries(const root_plan& plan);

/// The read-only binds, as paths inside the root (Landlock grants them read and execute).
std::vector<std::string> read_only_binds(const root_plan& plan);

/// In init, in its new mount and pid namespaces, with the namespace's capabilities: builds the
/// root on plan.mount_point, pivots into it, detaches the old root and makes "/" read-only.
setup_result<void> enter_minimal_root(const root_plan& plan);

}  // namespace psych::launcher
