#pragma once
// The kernel's process table, as sysctl(KERN_PROC) shows it: macOS has no /proc. What the launcher
// reads of it: who each process's parent, group and real uid are, and when it started.
#include <cstdint>
#include <optional>
#include <vector>

#include <sys/types.h>

#include "setup_error.hpp"

namespace psych::launcher {

struct process_entry {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t pgid = 0;
  uid_t ruid = 0;
  unsigned long long start_time = 0;  ///< microseconds since the epoch: with the pid, one process for good
  bool dead = false;                  ///< a zombie
};

/// Every process now. An error when the table cannot be read.
setup_result<std::vector<process_entry>> read_process_table();

/// One process, or nullopt when it is gone.
std::optional<process_entry> read_process(pid_t pid);

/// How many processes have `uid` as their real uid: what RLIMIT_NPROC counts on macOS (processes,
/// not threads).
setup_result<std::int64_t> count_processes_of(uid_t uid);

}  // namespace psych::launcher
