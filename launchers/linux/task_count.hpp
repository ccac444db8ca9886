#pragma once
// process_count_base: how many tasks RLIMIT_NPROC already charges to the
// child's uid. The kernel counts every task (thread) by its *real* uid, so the
// count must be by real uid too, and must never come out low: a low base sets
// a limit below what the program was promised.
#include <cstdint>

#include <sys/types.h>

#include "setup_error.hpp"

namespace psych::launcher {

/// The uid's processes and threads now, as RLIMIT_NPROC counts them (by real uid). Exact for
/// each process it reads; a thread whose credentials differ from its leader's is counted with
/// its leader, as /proc/<pid>/status reports the leader's uid and the group's thread count.
setup_result<std::int64_t> count_tasks_of(uid_t uid);

}  // namespace psych::launcher
