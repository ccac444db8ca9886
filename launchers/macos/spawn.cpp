#include "spawn.hpp"

#include "seatbelt.hpp"

namespace psych::launcher {

namespace {

setup_result<void> set_up_child(const child_plan& plan, pid_t launcher) {
  PSYCH_TRY(enter_child_session(plan.basics));
  PSYCH_TRY(become(plan.basics.identity));
  // There is no parent-death signal on macOS: a launcher that dies after this check leaves the
  // interpreter to the host's wall clock (docs/macos-launcher.md).
  PSYCH_TRY(enter_workspace(plan.basics, launcher));
  // Last before the exec, as the seccomp filter is on Linux: nothing after it needs what it denies.
  PSYCH_TRY(enter_seatbelt(plan.profile));
  return fail(exec_interpreter(plan.basics));
}

}  // namespace

setup_result<spawned> spawn(const child_plan& plan) {
  return fork_and_exec([&plan](pid_t launcher) { return set_up_child(plan, launcher).error(); });
}

}  // namespace psych::launcher
