#pragma once
// The process tree under the Linux launcher. The launcher is a child subreaper, so every orphan of
// the program (a daemon that called setsid() and forked twice included) is re-parented to it
// rather than to init: "my descendants" is then exactly "the program's processes", and killing
// them never touches anything that is not ours. The sweep itself is tree_sweep.hpp's.
#include <optional>
#include <vector>

#include "identity.hpp"
#include "setup_error.hpp"
#include "tree_sweep.hpp"

namespace psych::launcher {

/// PR_SET_CHILD_SUBREAPER on the launcher, before the fork.
setup_result<void> become_subreaper();

/// The descendants as /proc shows them (their parent chains reach the launcher), each signalled
/// through a pidfd opened after re-reading its start time, so a recycled pid is never signalled.
/// With `sole_owner` (the run_as identity, where this execution holds its uid alone), everything
/// of that uid can also be killed at once (owner_kill.hpp).
class proc_descendants final : public descendant_finder {
 public:
  explicit proc_descendants(std::optional<identity_plan> sole_owner = std::nullopt)
      : sole_owner_(sole_owner) {}
  [[nodiscard]] bool adopts_orphans() const override { return true; }
  std::vector<process_seen> descendants() override;
  bool signal_exactly(const process_seen& target, int signal) override;
  bool kill_by_owner() override;

 private:
  std::optional<identity_plan> sole_owner_;
};

}  // namespace psych::launcher
