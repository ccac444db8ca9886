#pragma once
// What an execution can leave on the host, read from the kernel directly (never through the code
// under test): the conformance suite and the soak check the same two things after every run.
#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace psych::testing {

/// The pids of every live process whose /proc entry belongs to `uid`.
inline std::vector<int> processes_of(std::int64_t uid) {
  std::vector<int> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const auto name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    struct stat st {};
    if (::stat(entry.path().c_str(), &st) == 0 && static_cast<std::int64_t>(st.st_uid) == uid)
      found.push_back(std::stoi(name));
  }
  return found;
}

/// cgroups named for a launcher that no longer exists. A launcher's cgroup is named
/// psych-<its pid>-<n>; a live launcher's (a test running beside this one) is still in use.
inline std::vector<std::string> abandoned_cgroups() {
  std::vector<std::string> found;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator("/sys/fs/cgroup", ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() > 4) it.disable_recursion_pending();
    const auto name = it->path().filename().string();
    if (!name.starts_with("psych-")) continue;
    it.disable_recursion_pending();
    const auto pid = std::atoi(name.c_str() + 6);
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) found.push_back(it->path().string());
  }
  return found;
}

}  // namespace psych::testing
