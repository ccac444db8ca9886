#pragma once
// A process that starts sandboxes, alone in a cgroup v2 cgroup it may manage (a systemd unit with
// Delegate=yes, a user's delegated scope, a container's own cgroup), keeps that cgroup from
// handing controllers down: the kernel refuses it in a cgroup that holds processes. Settling in a
// leaf of it frees it, and the launchers this process starts then make each execution's cgroup
// beside the leaf (docs/cgroups.md). psych's own commands do this at start; a runtime that embeds
// psych calls it once, before its first sandbox, if it wants the same.
#include <string>

namespace psych::host {

struct cgroup_settlement {
  bool moved = false;  ///< this process moved into `leaf`, and its old cgroup hands memory and pids down
  std::string leaf;    ///< the leaf it moved into
  /// Why it did not move, where that is worth saying (a cgroup it shares, one it may not write,
  /// controllers not delegated to it). Empty when there was nothing to do: not cgroup v2, or the
  /// cgroup already hands memory and pids down.
  std::string why_not;
};

/// On Linux with cgroup v2: if this process is the only one in its cgroup, may write it, and the
/// cgroup offers memory and pids but does not hand them down, moves this process (every thread)
/// into "<cgroup>/psych-host" and enables memory and pids in the cgroup; if enabling fails, it
/// moves back. It never moves another process. Elsewhere, nothing.
cgroup_settlement settle_in_cgroup_leaf();

}  // namespace psych::host
