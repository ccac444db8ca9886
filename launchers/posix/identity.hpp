#pragma once
// Who the child runs as. At the PROCESS level the uid is the boundary that
// keeps the program out of the worker's files and processes, so a child that
// would keep the worker's identity (or root's) is refused unless the
// deployment said allow_same_uid.
#include <cstdint>
#include <optional>
#include <string>

#include <sys/types.h>

#include "setup_error.hpp"
#include "psych/protocol/frames.hpp"

namespace psych::launcher {

struct identity_plan {
  uid_t uid = 0;      ///< the child's uid: run_as, or the worker's own
  gid_t gid = 0;
  bool drop = false;  ///< true: setgroups/setresgid/setresuid to run_as in the child
};

/// Applies the refusal rules: no run_as, a run_as equal to the worker's uid, or uid/gid 0,
/// are refused at stage "identity" unless allow_same_uid.
setup_result<identity_plan> plan_identity(const std::optional<protocol::identity>& run_as,
                                          bool allow_same_uid);

/// Before the fork: gives `directory` to the child's identity, so a dropped uid can use it.
setup_result<void> hand_over(const std::string& directory, const identity_plan& plan);

/// In the child: clears supplementary groups, sets every gid then every uid, and reads them back;
/// a drop that did not stick is a failure, never a warning. Defined by each launcher
/// (linux/identity_drop.cpp, macos/identity_drop.cpp): only Linux can read the saved ids back.
setup_result<void> become(const identity_plan& plan);

}  // namespace psych::launcher
