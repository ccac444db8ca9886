#pragma once
// Reading /proc: the launcher's only view of the processes around it at the
// PROCESS level (no pid namespace, no cgroup). Plain POSIX reads into stack
// buffers: this runs on every launch, so no streams.
#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "setup_error.hpp"

namespace psych::launcher {

/// Every process /proc lists (thread-group leaders), at the moment of the call.
setup_result<std::vector<pid_t>> list_processes();

/// The fields of /proc/<pid>/stat the launcher needs.
struct process_stat {
  pid_t pid = 0;
  pid_t ppid = 0;
  char state = '?';                   ///< 'Z' zombie, 'X' dead, ...
  unsigned long long start_time = 0;  ///< ticks since boot: with the pid, names one process for good
};

/// nullopt when the process is gone (or its stat cannot be parsed).
std::optional<process_stat> read_stat(pid_t pid);

/// Reads /proc/<pid>/<name> into `buffer`: the text, or nullopt when the process is gone.
std::optional<std::string_view> read_proc_file(pid_t pid, const char* name, char* buffer,
                                               std::size_t size);

}  // namespace psych::launcher
