#include "job.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string_view>

#include "job_readback.hpp"

namespace psych::windows {

namespace {

std::int64_t ticks_of(double seconds) { return static_cast<std::int64_t>(std::ceil(seconds)) * 10'000'000; }

}  // namespace

setup_result<execution_job> execution_job::create(const sandbox_limits& limits) {
  unique_handle handle(::CreateJobObjectW(nullptr, nullptr));
  if (!handle) return fail(last_error(launch_stage::job, "CreateJobObjectW"));
  execution_job job(std::move(handle));

  JOBOBJECT_EXTENDED_LIMIT_INFORMATION info{};
  auto& basic = info.BasicLimitInformation;
  // No JOB_OBJECT_LIMIT_BREAKAWAY_OK or SILENT_BREAKAWAY_OK: nothing of the tree can leave the job.
  // DIE_ON_UNHANDLED_EXCEPTION: a crash ends the process instead of waiting on an error dialog.
  basic.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION |
                     JOB_OBJECT_LIMIT_ACTIVE_PROCESS | JOB_OBJECT_LIMIT_JOB_MEMORY |
                     JOB_OBJECT_LIMIT_PROCESS_MEMORY | JOB_OBJECT_LIMIT_JOB_TIME | JOB_OBJECT_LIMIT_PROCESS_TIME;
  basic.ActiveProcessLimit = static_cast<DWORD>(limits.process_count.value);
  basic.PerJobUserTimeLimit.QuadPart = ticks_of(limits.cpu_seconds.value);
  basic.PerProcessUserTimeLimit.QuadPart = ticks_of(limits.cpu_seconds.value);
  info.JobMemoryLimit = static_cast<SIZE_T>(limits.address_space_bytes.value);
  info.ProcessMemoryLimit = static_cast<SIZE_T>(limits.address_space_bytes.value);
  if (!::SetInformationJobObject(job.handle(), JobObjectExtendedLimitInformation, &info, sizeof info))
    return fail(last_error(launch_stage::job, "SetInformationJobObject", "JobObjectExtendedLimitInformation"));

  JOBOBJECT_BASIC_UI_RESTRICTIONS ui{every_ui_limit};
  if (!::SetInformationJobObject(job.handle(), JobObjectBasicUIRestrictions, &ui, sizeof ui))
    return fail(last_error(launch_stage::job, "SetInformationJobObject", "JobObjectBasicUIRestrictions"));

  PSYCH_TRY(job.read_limits_back());
  return job;
}

setup_result<void> execution_job::read_limits_back() {
  PSYCH_TRY(read_back_, read_job_back(job_.get()));
  return success();
}

setup_result<void> execution_job::assign(HANDLE process) const {
  if (!::AssignProcessToJobObject(job_.get(), process)) return fail(last_error(launch_stage::job, "AssignProcessToJobObject"));
  return success();
}

setup_result<job_accounting> execution_job::accounting() const {
  JOBOBJECT_BASIC_ACCOUNTING_INFORMATION info{};
  if (!::QueryInformationJobObject(job_.get(), JobObjectBasicAccountingInformation, &info, sizeof info, nullptr))
    return fail(last_error(launch_stage::job, "QueryInformationJobObject", "JobObjectBasicAccountingInformation"));
  return job_accounting{.active_processes = info.ActiveProcesses,
                        .user_seconds = static_cast<double>(info.TotalUserTime.QuadPart) / ticks_per_second,
                        .kernel_seconds = static_cast<double>(info.TotalKernelTime.QuadPart) / ticks_per_second};
}

namespace {

bool is_console_host(DWORD pid) {
  const unique_handle process(::OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, pid));
  if (!process) return false;
  wchar_t image[MAX_PATH * 2] = {};
  DWORD length = MAX_PATH * 2;
  if (!::QueryFullProcessImageNameW(process.get(), 0, image, &length)) return false;
  const std::wstring_view path(image, length);
  const auto name = path.substr(path.find_last_of(L"\\/") + 1);
  constexpr std::wstring_view console_host = L"conhost.exe";
  return ::CompareStringOrdinal(name.data(), static_cast<int>(name.size()), console_host.data(),
                                static_cast<int>(console_host.size()), TRUE) == CSTR_EQUAL;
}

}  // namespace

setup_result<std::int64_t> execution_job::descendants_of(std::int64_t child) const {
  // JOBOBJECT_BASIC_PROCESS_ID_LIST with room for 1024 ids. Its own ProcessIdList[1] cannot be
  // indexed past 0 (the compiler may assume the bound). A job with more fails with ERROR_MORE_DATA,
  // and the accounting's count (console hosts and the child included) is the answer then.
  struct {
    DWORD assigned;
    DWORD listed;
    ULONG_PTR pids[1024];
  } ids{};
  static_assert(offsetof(decltype(ids), pids) == offsetof(JOBOBJECT_BASIC_PROCESS_ID_LIST, ProcessIdList));
  if (!::QueryInformationJobObject(job_.get(), JobObjectBasicProcessIdList, &ids, sizeof ids, nullptr)) {
    if (::GetLastError() != ERROR_MORE_DATA)
      return fail(last_error(launch_stage::job, "QueryInformationJobObject", "JobObjectBasicProcessIdList"));
    PSYCH_TRY(const auto now, accounting());
    return now.active_processes;
  }
  std::int64_t count = 0;
  for (DWORD i = 0; i < std::min<DWORD>(ids.listed, 1024); ++i)
    if (static_cast<std::int64_t>(ids.pids[i]) != child && !is_console_host(static_cast<DWORD>(ids.pids[i]))) ++count;
  return count;
}

bool execution_job::cpu_limit_reached(const job_accounting& now) const {
  const auto limit = read_back_.job.cpu_seconds;
  return limit > 0 && now.user_seconds >= static_cast<double>(limit);
}

std::int64_t execution_job::kill_and_verify_empty(DWORD patience_ms) const {
  // The exit code every process of the tree ends with when the launcher ends it.
  constexpr UINT killed_by_launcher = 1;
  ::TerminateJobObject(job_.get(), killed_by_launcher);
  const ULONGLONG give_up = ::GetTickCount64() + patience_ms;
  for (;;) {
    auto now = accounting();
    // Accounting that cannot be read proves nothing: count the tree as not verified empty.
    if (!now) return 1;
    if (now.value().active_processes == 0 || ::GetTickCount64() >= give_up) return now.value().active_processes;
    ::Sleep(5);
  }
}

}  // namespace psych::windows
