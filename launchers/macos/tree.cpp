#include "tree.hpp"

#include <csignal>

#include "process_table.hpp"

namespace psych::launcher {

std::vector<process_seen> table_descendants::descendants() {
  std::vector<process_seen> seen;
  auto table = read_process_table();
  // An unreadable table shows nothing; the sweep still counts the children it cannot reap.
  if (!table) return seen;
  for (const auto& entry : select_descendants(table.value(), marks_))
    seen.push_back({.pid = entry.pid, .start_time = entry.start_time, .dead = entry.dead});
  return seen;
}

bool table_descendants::signal_exactly(const process_seen& target, int signal) {
  const auto now = read_process(target.pid);
  if (!now || now->start_time != target.start_time) return false;
  return ::kill(target.pid, signal) == 0;
}

}  // namespace psych::launcher
