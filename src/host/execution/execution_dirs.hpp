#pragma once
// The per-execution directories: a fresh empty workspace (the child's cwd
// and HOME), a private TMPDIR, and, well away from both, the host canary
// file the child must not be able to read.
#include <cstdint>
#include <optional>
#include <string>

#include "psych/result.hpp"

namespace psych::host {

struct execution_dirs {
  std::string base;       ///< 0711: traversable to reach the workspace, not listable
  std::string workspace;  ///< empty; chowned to the child's uid by the launcher
  std::string tmp;
  std::string canary_dir;  ///< 0700, outside base
  std::string canary;      ///< 0600, random content
};

result<execution_dirs> make_execution_dirs(const std::string& temp_root);

/// Removes everything, never following symlinks the program may have planted,
/// whatever the depth. False if something could not be removed.
[[nodiscard]] bool remove_execution_dirs(const execution_dirs& dirs);

/// Removes what a dedicated child uid left directly in the world-writable
/// directories (/tmp, /var/tmp, /dev/shm, /run/lock, /dev/mqueue). Only for a
/// uid no other execution is using at the same time. What it left deeper,
/// inside somebody else's directory, is not found (docs/process-backend.md).
/// Root's and the worker's own uid are never swept, whatever the caller says: their entries
/// there are the host's, not an execution's.
void sweep_shared_temp(std::int64_t uid);

}  // namespace psych::host
