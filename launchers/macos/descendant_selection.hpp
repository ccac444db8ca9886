#pragma once
// Which processes of the table are the program's, where orphans are re-parented to launchd rather
// than to the launcher: a pure function of the table, tested on every platform
// (tests/launcher/macos_parts_tests.cpp).
#include <optional>
#include <unordered_map>
#include <vector>

#include <sys/types.h>

#include "process_table.hpp"

namespace psych::launcher {

struct tree_marks {
  pid_t launcher = 0;
  /// The interpreter's process group (its pid: it called setsid()); nullopt before there is one.
  std::optional<pid_t> group;
  /// The run_as uid when this execution holds it alone (launch.run_as.exclusive): every process
  /// of it is the program's, whatever its parent or session became.
  std::optional<uid_t> exclusive_uid;
};

/// The processes whose parent chain reaches the launcher, that are in the interpreter's group, or
/// that run as the execution's own uid. Never the launcher itself, nor pid 0 or 1.
inline std::vector<process_entry> select_descendants(const std::vector<process_entry>& table, const tree_marks& marks) {
  std::unordered_map<pid_t, const process_entry*> by_pid;
  for (const auto& entry : table) by_pid.emplace(entry.pid, &entry);
  const auto descends = [&](const process_entry& entry) {
    pid_t parent = entry.ppid;
    // Bounded walk: a chain longer than the table would be a cycle from a racy read.
    for (std::size_t hops = 0; hops <= table.size() && parent > 1; ++hops) {
      if (parent == marks.launcher) return true;
      const auto up = by_pid.find(parent);
      if (up == by_pid.end()) return false;
      parent = up->second->ppid;
    }
    return false;
  };
  std::vector<process_entry> found;
  for (const auto& entry : table) {
    if (entry.pid <= 1 || entry.pid == marks.launcher) continue;
    const bool ours = descends(entry) || (marks.group && entry.pgid == *marks.group) ||
                      (marks.exclusive_uid && entry.ruid == *marks.exclusive_uid);
    if (ours) found.push_back(entry);
  }
  return found;
}

}  // namespace psych::launcher
