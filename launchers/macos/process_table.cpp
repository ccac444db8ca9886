#include "process_table.hpp"

#include <cerrno>

#include <sys/proc.h>
#include <sys/sysctl.h>

#include <fmt/format.h>

namespace psych::launcher {

namespace {

process_entry entry_of(const kinfo_proc& info) {
  const timeval& started = info.kp_proc.p_starttime;
  return {.pid = info.kp_proc.p_pid,
          .ppid = info.kp_eproc.e_ppid,
          .pgid = info.kp_eproc.e_pgid,
          .ruid = info.kp_eproc.e_pcred.p_ruid,
          .start_time = static_cast<unsigned long long>(started.tv_sec) * 1'000'000ULL +
                        static_cast<unsigned long long>(started.tv_usec),
          .dead = info.kp_proc.p_stat == SZOMB};
}

/// sysctl(KERN_PROC, …) into a vector, sized by a first call and grown while the table grows.
setup_result<std::vector<kinfo_proc>> read_kinfo(int* mib, u_int length, const char* what) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    size_t size = 0;
    if (::sysctl(mib, length, nullptr, &size, nullptr, 0) != 0)
      return fail(system_failure(launch_stage::proc, "sysctl", errno, what));
    std::vector<kinfo_proc> table(size / sizeof(kinfo_proc) + 16);
    size = table.size() * sizeof(kinfo_proc);
    if (::sysctl(mib, length, table.data(), &size, nullptr, 0) == 0) {
      table.resize(size / sizeof(kinfo_proc));
      return table;
    }
    if (errno != ENOMEM) return fail(system_failure(launch_stage::proc, "sysctl", errno, what));
  }
  return fail(system_failure(launch_stage::proc, "sysctl", ENOMEM, what));
}

}  // namespace

setup_result<std::vector<process_entry>> read_process_table() {
  int mib[3] = {CTL_KERN, KERN_PROC, KERN_PROC_ALL};
  PSYCH_TRY(auto table, read_kinfo(mib, 3, "KERN_PROC, KERN_PROC_ALL"));
  std::vector<process_entry> entries;
  entries.reserve(table.size());
  for (const auto& info : table) entries.push_back(entry_of(info));
  return entries;
}

std::optional<process_entry> read_process(pid_t pid) {
  int mib[4] = {CTL_KERN, KERN_PROC, KERN_PROC_PID, pid};
  kinfo_proc info{};
  size_t size = sizeof info;
  if (::sysctl(mib, 4, &info, &size, nullptr, 0) != 0 || size < sizeof info) return std::nullopt;
  return entry_of(info);
}

setup_result<std::int64_t> count_processes_of(uid_t uid) {
  int mib[4] = {CTL_KERN, KERN_PROC, KERN_PROC_RUID, static_cast<int>(uid)};
  PSYCH_TRY(auto table, read_kinfo(mib, 4, fmt::format("KERN_PROC, KERN_PROC_RUID, {}", uid).c_str()));
  return static_cast<std::int64_t>(table.size());
}

}  // namespace psych::launcher
