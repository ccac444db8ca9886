#pragma once
// A Job Object's limits as QueryInformationJobObject reads them back: by the launcher for the job
// it made, and by the test child for the job it runs in (the handle nullptr: the caller's own).
#include <cstdint>

#include <windows.h>

#include "setup_error.hpp"
#include "psych/reports.hpp"

namespace psych::windows {

/// Job times are in 100 ns units.
inline constexpr double ticks_per_second = 1e7;

/// Every user-interface restriction class a job can hold.
inline constexpr DWORD every_ui_limit =
    JOB_OBJECT_UILIMIT_DESKTOP | JOB_OBJECT_UILIMIT_DISPLAYSETTINGS | JOB_OBJECT_UILIMIT_EXITWINDOWS |
    JOB_OBJECT_UILIMIT_GLOBALATOMS | JOB_OBJECT_UILIMIT_HANDLES | JOB_OBJECT_UILIMIT_READCLIPBOARD |
    JOB_OBJECT_UILIMIT_SYSTEMPARAMETERS | JOB_OBJECT_UILIMIT_WRITECLIPBOARD;

/// The job-wide limits (job_readback) and the per-process ones, which stand where a POSIX launcher
/// reports its rlimits.
struct job_limits_read_back {
  job_readback job;
  applied_rlimits per_process;
};

/// `job` as it reads back; nullptr reads the job the calling process runs in, and fails when it
/// runs in none.
setup_result<job_limits_read_back> read_job_back(HANDLE job);

}  // namespace psych::windows
