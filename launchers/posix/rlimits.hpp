#pragma once
// Resource limits, set in the child between fork and exec. The values are
// computed once, in the launcher, so the `started` report states exactly what
// the child got rather than re-deriving it.
#include <cstdint>

#include <sys/resource.h>

#include "setup_error.hpp"
#include "psych/limits.hpp"
#include "psych/reports.hpp"

namespace psych::launcher {

struct rlimit_plan {
  rlim_t cpu_soft = 0;       ///< ceil(cpu_seconds): SIGXCPU
  rlim_t cpu_hard = 0;       ///< one second later: SIGKILL, for a child that handles SIGXCPU
  rlim_t address_space = 0;
  rlim_t file_size = 0;
  rlim_t process_count = 0;  ///< requested count + the target uid's existing tasks
  rlim_t open_files = 0;
};

/// The limits the child will get. `process_count_base` is the target uid's task count.
rlimit_plan plan_rlimits(const sandbox_limits& limits, std::int64_t open_files,
                         std::int64_t process_count_base);

/// In the child, before the identity drop (raising a hard limit needs the launcher's privilege).
/// RLIMIT_CORE is always 0: a core dump would write the program's memory outside the workspace.
setup_result<void> apply_rlimits(const rlimit_plan& plan);

/// The plan as the `started` frame reports it.
applied_rlimits report_rlimits(const rlimit_plan& plan);

}  // namespace psych::launcher
