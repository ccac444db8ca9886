#include "signals.hpp"

#include <cerrno>
#include <csignal>

namespace psych::launcher {

setup_result<void> restore_default_signals() {
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int signal = 1; signal < NSIG; ++signal) {
    // SIGKILL, SIGSTOP and the realtime signals glibc reserves refuse with EINVAL: nothing to undo.
    if (::sigaction(signal, &default_action, nullptr) != 0 && errno != EINVAL)
      return fail(system_failure(launch_stage::signals, "sigaction", errno, "SIG_DFL"));
  }
  sigset_t none;
  sigemptyset(&none);
  if (::sigprocmask(SIG_SETMASK, &none, nullptr) != 0)
    return fail(system_failure(launch_stage::signals, "sigprocmask", errno, "SIG_SETMASK, {}"));
  return success();
}

}  // namespace psych::launcher
