// The launcher's signals through a signalfd (Linux): blocked, so they stay blocked in what the
// launcher clones (ISOLATED's init waits for its children with them blocked), and read as records.
#include "signals.hpp"

#include <cerrno>
#include <csignal>

#include <sys/signalfd.h>
#include <unistd.h>

#include "platform/posix/retry.hpp"

namespace psych::launcher {

namespace {

sigset_t watched_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (const int signal : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, signal);
  return set;
}

signals_seen drain_signal_fd(int fd) {
  signals_seen seen;
  signalfd_siginfo info[8];
  for (;;) {
    const ssize_t got = posix::retry_on_eintr([&] { return ::read(fd, info, sizeof info); });
    if (got <= 0) break;
    for (std::size_t i = 0; i < static_cast<std::size_t>(got) / sizeof info[0]; ++i) {
      if (info[i].ssi_signo == SIGCHLD) seen.child = true;
      else seen.termination = true;
    }
  }
  return seen;
}

}  // namespace

setup_result<signal_source> open_signal_source() {
  const sigset_t set = watched_signals();
  if (::sigprocmask(SIG_BLOCK, &set, nullptr) != 0)
    return fail(system_failure(launch_stage::signals, "sigprocmask", errno, "SIG_BLOCK, SIGCHLD|SIGTERM|SIGINT|SIGHUP"));
  if (std::signal(SIGPIPE, SIG_IGN) == SIG_ERR)
    return fail(system_failure(launch_stage::signals, "signal", errno, "SIGPIPE, SIG_IGN"));
  const int fd = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) return fail(system_failure(launch_stage::signals, "signalfd", errno, "SIGCHLD|SIGTERM|SIGINT|SIGHUP"));
  return signal_source{.fd = fd, .drain_fd = drain_signal_fd};
}

}  // namespace psych::launcher
