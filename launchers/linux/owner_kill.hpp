#pragma once
// Ending every process of the execution's own uid at once, where that uid is the execution's alone
// (a root worker's run_as pool that hands each execution its own uid: launch.run_as.exclusive).
// A helper the launcher forks takes the uid and sends kill(-1, SIGKILL), which reaches exactly the
// processes whose real or saved uid is that one, the helper itself excepted. Linux signals them all
// under one hold of the task list, and a fork cannot slip between: a child linked into the list
// before is signalled with the rest, and a fork that finishes after finds its parent's SIGKILL
// pending and fails. So a chain of processes that fork and exit, which can outrun every scan of
// /proc on a slow host, cannot outrun this (tree_sweep.cpp sends it first, once something is
// found left).
#include "identity.hpp"

namespace psych::launcher {

/// True once the helper sent the signal; false when it could not be forked, could not take the
/// uid, or kill(-1) failed. Waits for the helper (and reaps nothing else).
bool kill_every_process_of(const identity_plan& owner);

}  // namespace psych::launcher
