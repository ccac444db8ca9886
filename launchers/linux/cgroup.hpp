#pragma once
// The cgroup of an ISOLATED execution: memory, pids and cpu limits that hold for the whole process
// tree (rlimits are per process), and a kill that reaches every process in it, wherever it
// re-parented itself. A fresh child cgroup per execution, under the launcher's own cgroup.
//
// cgroup v2 is used when a cgroup at or above the launcher's own hands memory and pids down (and
// cpu, when a quota is asked for) and the launcher may write it: PSYCH_CGROUP_PARENT if set, else
// the nearest such cgroup, never above one systemd delegated (docs/cgroups.md); else cgroup v1 when
// those hierarchies let the launcher make a child; else none, which is an answer and not an error:
// the caller grades memory as not enforced by a cgroup, and why_none() says what held v2 back.
// The launcher moves no process but its own children.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "setup_error.hpp"

namespace psych::launcher {

struct cgroup_limits {
  std::int64_t memory_bytes = 0;       ///< rounded up to whole pages; swap gets none of it
  std::int64_t pids = 0;               ///< processes and threads, the first one included
  double cpu_seconds_per_second = 0;  ///< 0: no cpu quota
};

enum class cgroup_version { none, v1, v2 };

/// "none", "v1", "v2": the name the `started` report carries.
std::string_view name_of_version(cgroup_version version);

/// One execution's cgroup. Move-only; destroying it removes it (best effort).
class execution_cgroup {
 public:
  /// A cgroup of version none: every operation is a no-op.
  execution_cgroup() = default;
  execution_cgroup(execution_cgroup&& other) noexcept;
  execution_cgroup& operator=(execution_cgroup&& other) noexcept;
  execution_cgroup(const execution_cgroup&) = delete;
  execution_cgroup& operator=(const execution_cgroup&) = delete;
  ~execution_cgroup();

  /// Makes "psych-<launcher pid>-<counter>" in the launcher's cgroup or one above it (see above),
  /// writes the limits and reads each back: a limit that does not read back as written fails the call. Version none
  /// (not an error) when no hierarchy lets the launcher make a child holding every limit asked for.
  static setup_result<execution_cgroup> create(const cgroup_limits& limits);

  cgroup_version version() const;

  /// For version none on a cgroup v2 host (no v1 memory hierarchy): which cgroup held it back,
  /// which controller, and what to configure. Empty otherwise.
  const std::string& why_none() const noexcept { return why_none_; }

  /// Writes lower limits into the existing cgroup and reads each back (a prepared sandbox being
  /// claimed: docs/pools.md). The caller checked they do not exceed the ones it was made with.
  /// A no-op for version none.
  setup_result<void> narrow(const cgroup_limits& limits) const;

  /// Moves `pid` into the cgroup in every hierarchy. For a child still waiting for the go-ahead,
  /// so that nothing it runs is ever outside.
  setup_result<void> attach(pid_t pid) const;

  /// Host paths a sandbox may bind read-only so the program can read its limits back:
  /// v1 the memory and pids directories (and cpuacct's, for the tree's CPU time), v2 the one directory. Empty for none and once removed.
  std::vector<std::string> directories() const;

  /// SIGKILLs every process in the cgroup (cgroup.kill on v2; on v1, or a kernel before 5.14,
  /// round after round until none is listed, for at most 2 s). The number of processes signalled.
  std::int64_t kill_all() const;

  /// Whether a charge ever hit the memory limit (v1 memory.failcnt or an OOM kill; v2
  /// memory.events max or oom_kill). A hit that reclaim absorbed counts too. Ask before remove().
  bool memory_limit_hit() const;

  /// CPU time (user + system) the whole tree has used so far, from cpuacct.usage (v1) or
  /// cpu.stat usage_usec (v2); nullopt without such accounting. RLIMIT_CPU binds each process
  /// alone, so this is what holds cpu_seconds for a tree of spinners.
  std::optional<double> cpu_seconds() const;

  /// Whether cpu_seconds() has an accounting directory to read (v1 cpuacct, or v2).
  bool has_cpu_accounting() const noexcept { return accounting_.has_value() && !removed_; }

  /// kill_all(), then rmdir in every hierarchy, retrying for about 1 s while the kernel still
  /// calls a directory busy. Idempotent; a directory that failed stays for the next call.
  setup_result<void> remove();

 private:
  cgroup_version version_ = cgroup_version::none;
  std::vector<std::string> directories_;  ///< memory's first; v1 cpu's, if any, last
  std::size_t exposed_ = 0;               ///< leading directories that directories() reports
  std::optional<std::size_t> accounting_;  ///< the directory that reports the tree's CPU time
  bool removed_ = false;                  ///< remove() began: directories_ holds only what it could not remove
  std::string why_none_;
};

/// Inside a container with a cgroup namespace of its own: the CPU time its whole cgroup (the
/// launcher and the tree) has used, from what appears at /sys/fs/cgroup; nullopt where there is
/// no accounting to read. The container runtime made the cgroup; the launcher only budgets by it.
std::optional<double> container_cpu_seconds();

/// Inside such a container: whether its memory limit was ever hit (as memory_limit_hit()).
bool container_memory_limit_hit();

}  // namespace psych::launcher
