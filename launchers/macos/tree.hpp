#pragma once
// The process tree under the macOS launcher. There is no child subreaper: an orphan goes to
// launchd, so "no children left" does not mean "no descendants". The program's processes are found
// in the process table instead (descendant_selection.hpp): by parent chain, by the interpreter's
// process group, and, when the execution holds its uid alone, by that uid, which also finds a
// daemon that left the session. The sweep itself is tree_sweep.hpp's.
#include <vector>

#include "descendant_selection.hpp"
#include "tree_sweep.hpp"

namespace psych::launcher {

class table_descendants final : public descendant_finder {
 public:
  explicit table_descendants(tree_marks marks) : marks_(marks) {}
  [[nodiscard]] bool adopts_orphans() const override { return false; }
  std::vector<process_seen> descendants() override;
  /// Re-reads the process and compares its start time before kill(): there is no pidfd, so a pid
  /// recycled in the moment between that read and the signal is the one race left.
  bool signal_exactly(const process_seen& target, int signal) override;

 private:
  tree_marks marks_;
};

}  // namespace psych::launcher
