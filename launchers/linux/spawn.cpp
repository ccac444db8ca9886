#include "spawn.hpp"

#include <cerrno>
#include <csignal>

#include <sys/prctl.h>
#include <unistd.h>

namespace psych::launcher {

namespace {

// Runs in the child between fork and exec, after the shared first steps (child_start.hpp).
setup_result<void> set_up_child(const child_plan& plan, pid_t launcher) {
  PSYCH_TRY(enter_child_session(plan.basics));
  PSYCH_TRY(become(plan.basics.identity));
  // After the identity drop, because changing the euid clears the parent-death signal; before
  // enter_workspace(), which fails if the launcher died before this line.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
    return fail(system_failure(launch_stage::session, "prctl", errno, "PR_SET_PDEATHSIG, SIGKILL"));
  PSYCH_TRY(enter_workspace(plan.basics, launcher));
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return fail(system_failure(launch_stage::no_new_privs, "prctl", errno, "PR_SET_NO_NEW_PRIVS, 1"));
  // Needs NoNewPrivs (an unprivileged restrict_self is refused without it); after the chdir, so
  // the workspace is entered before anything is restricted.
  if (plan.landlock != nullptr) {
    PSYCH_TRY(plan.landlock->restrict_self());
  }
  PSYCH_TRY(install_filter(plan.filter));
  return fail(exec_interpreter(plan.basics));
}

}  // namespace

setup_result<spawned> spawn(const child_plan& plan) {
  return fork_and_exec([&plan](pid_t launcher) { return set_up_child(plan, launcher).error(); });
}

}  // namespace psych::launcher
