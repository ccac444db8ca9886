#include "signals.hpp"

#include <cerrno>
#include <csignal>

#include <sys/signalfd.h>
#include <unistd.h>

namespace psych::launcher {

namespace {

sigset_t watched_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (const int signal : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, signal);
  return set;
}

}  // namespace

setup_result<int> open_signal_fd() {
  const sigset_t set = watched_signals();
  if (::sigprocmask(SIG_BLOCK, &set, nullptr) != 0)
    return fail(system_failure("signals", "sigprocmask", errno, "SIG_BLOCK, SIGCHLD|SIGTERM|SIGINT|SIGHUP"));
  if (std::signal(SIGPIPE, SIG_IGN) == SIG_ERR)
    return fail(system_failure("signals", "signal", errno, "SIGPIPE, SIG_IGN"));
  const int fd = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) return fail(system_failure("signals", "signalfd", errno, "SIGCHLD|SIGTERM|SIGINT|SIGHUP"));
  return fd;
}

signals_seen drain_signal_fd(int fd) {
  signals_seen seen;
  signalfd_siginfo info[8];
  for (;;) {
    const ssize_t got = ::read(fd, info, sizeof info);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    for (std::size_t i = 0; i < static_cast<std::size_t>(got) / sizeof info[0]; ++i) {
      if (info[i].ssi_signo == SIGCHLD) seen.child = true;
      else seen.termination = true;
    }
  }
  return seen;
}

setup_result<void> restore_default_signals() {
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int signal = 1; signal < NSIG; ++signal) {
    // SIGKILL, SIGSTOP and the realtime signals glibc reserves refuse with EINVAL: nothing to undo.
    if (::sigaction(signal, &default_action, nullptr) != 0 && errno != EINVAL)
      return fail(system_failure("signals", "sigaction", errno, "SIG_DFL"));
  }
  sigset_t none;
  sigemptyset(&none);
  if (::sigprocmask(SIG_SETMASK, &none, nullptr) != 0)
    return fail(system_failure("signals", "sigprocmask", errno, "SIG_SETMASK, {}"));
  return success();
}

}  // namespace psych::launcher
