#pragma once
// Spawning the launcher with the contract's descriptor layout, and holding
// it by pidfd so that waiting for it and killing it can never hit a reused pid.
#include <sys/types.h>

#include <string>

#include "psych/result.hpp"

namespace psych::host {

struct launcher_fds {
  int stdout_write = -1;  ///< becomes fd 1
  int stderr_write = -1;  ///< becomes fd 2
  int control = -1;       ///< becomes fd 3
  int channel = -1;       ///< becomes fd 4
};

struct launcher_process {
  pid_t pid = -1;
  int pidfd = -1;  ///< owned by the caller
};

result<launcher_process> spawn_launcher(const std::string& launcher_path, const launcher_fds& fds);

/// Exit status of a launcher whose pidfd became readable; -1 if unknown.
int reap_launcher(const launcher_process& process);

}  // namespace psych::host
