#include "owner_kill.hpp"

#include <cerrno>
#include <csignal>

#include <sys/wait.h>
#include <unistd.h>

#include "platform/posix/retry.hpp"

namespace psych::launcher {

bool kill_every_process_of(const identity_plan& owner) {
  if (!owner.drop || owner.uid == 0) return false;  // never as root: kill(-1) would end the machine
  const pid_t helper = ::fork();
  if (helper < 0) return false;
  if (helper == 0) {
    if (!become(owner)) ::_exit(2);
    // ESRCH: nothing to signal. (With any process of another uid present, kill(-1) says 0 whether
    // or not one of this uid was among them: it is not a count.)
    ::_exit(::kill(-1, SIGKILL) == 0 || errno == ESRCH ? 0 : 1);
  }
  int status = 0;
  if (posix::retry_on_eintr([&] { return ::waitpid(helper, &status, 0); }) != helper) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace psych::launcher
