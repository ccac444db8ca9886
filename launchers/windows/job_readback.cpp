#include "job_readback.hpp"

#include <cmath>

namespace psych::windows {

namespace {

/// A time limit read back, in whole seconds rounded up; -1 when its flag reads back unset.
std::int64_t seconds_read_back(DWORD flags, DWORD flag, const LARGE_INTEGER& ticks) {
  if ((flags & flag) == 0 || ticks.QuadPart <= 0) return -1;
  return static_cast<std::int64_t>(std::ceil(static_cast<double>(ticks.QuadPart) / ticks_per_second));
}

std::int64_t bytes_read_back(DWORD flags, DWORD flag, SIZE_T bytes) {
  return (flags & flag) == 0 || bytes == 0 ? -1 : static_cast<std::int64_t>(bytes);
}

}  // namespace

setup_result<job_limits_read_back> read_job_back(HANDLE job_handle) {
  job_limits_read_back read_back;
  JOBOBJECT_EXTENDED_LIMIT_INFORMATION info{};
  if (!::QueryInformationJobObject(job_handle, JobObjectExtendedLimitInformation, &info, sizeof info, nullptr))
    return fail(last_error(launch_stage::job, "QueryInformationJobObject", "JobObjectExtendedLimitInformation"));
  const auto& basic = info.BasicLimitInformation;
  const DWORD flags = basic.LimitFlags;
  auto& job = read_back.job;
  job.in_job = true;
  job.kill_on_close = (flags & JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE) != 0;
  // A job that reads back no flags at all proves nothing about breakaway either.
  job.breakaway_forbidden =
      flags != 0 && (flags & (JOB_OBJECT_LIMIT_BREAKAWAY_OK | JOB_OBJECT_LIMIT_SILENT_BREAKAWAY_OK)) == 0;
  job.active_processes_limit = (flags & JOB_OBJECT_LIMIT_ACTIVE_PROCESS) != 0 && basic.ActiveProcessLimit > 0
                                    ? static_cast<std::int64_t>(basic.ActiveProcessLimit)
                                    : -1;
  job.memory_bytes = bytes_read_back(flags, JOB_OBJECT_LIMIT_JOB_MEMORY, info.JobMemoryLimit);
  job.cpu_seconds = seconds_read_back(flags, JOB_OBJECT_LIMIT_JOB_TIME, basic.PerJobUserTimeLimit);

  // Not every Windows answers the UI query (Wine fails it): then the restrictions are not proven.
  JOBOBJECT_BASIC_UI_RESTRICTIONS ui{};
  job.ui_restricted = ::QueryInformationJobObject(job_handle, JobObjectBasicUIRestrictions, &ui, sizeof ui, nullptr) &&
                      (ui.UIRestrictionsClass & every_ui_limit) == every_ui_limit;

  // Windows has no per-process cap on file size or open handles, and writes no core dumps.
  read_back.per_process = applied_rlimits{
      .cpu_seconds = seconds_read_back(flags, JOB_OBJECT_LIMIT_PROCESS_TIME, basic.PerProcessUserTimeLimit),
      .address_space_bytes = bytes_read_back(flags, JOB_OBJECT_LIMIT_PROCESS_MEMORY, info.ProcessMemoryLimit),
      .process_count = job.active_processes_limit};
  return read_back;
}

}  // namespace psych::windows
