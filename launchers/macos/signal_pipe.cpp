// The launcher's signals through a pipe its handlers write to (the self-pipe): macOS has no
// signalfd. A signal that arrives before poll() leaves its byte in the pipe, so poll() still wakes.
#include "signals.hpp"

#include <cerrno>
#include <csignal>

#include <fcntl.h>
#include <unistd.h>

#include "platform/posix/retry.hpp"

namespace psych::launcher {

namespace {

int pipe_write_end = -1;

extern "C" void note_signal(int signal) {
  const int saved = errno;  // the handler may interrupt code that is about to read errno
  const auto byte = static_cast<unsigned char>(signal);
  [[maybe_unused]] const auto ignored = ::write(pipe_write_end, &byte, 1);  // full pipe: a wake is pending
  errno = saved;
}

bool set_flags(int fd) {
  return ::fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 && ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) == 0;
}

signals_seen drain_signal_pipe(int fd) {
  signals_seen seen;
  unsigned char bytes[64];
  for (;;) {
    const ssize_t got = posix::retry_on_eintr([&] { return ::read(fd, bytes, sizeof bytes); });
    if (got <= 0) break;
    for (ssize_t i = 0; i < got; ++i) {
      if (bytes[i] == SIGCHLD) seen.child = true;
      else seen.termination = true;
    }
  }
  return seen;
}

}  // namespace

setup_result<signal_source> open_signal_source() {
  int ends[2];
  if (::pipe(ends) != 0) return fail(system_failure(launch_stage::signals, "pipe", errno));
  if (!set_flags(ends[0]) || !set_flags(ends[1])) {
    const int saved = errno;
    ::close(ends[0]);
    ::close(ends[1]);
    return fail(system_failure(launch_stage::signals, "fcntl", saved, "signal pipe, FD_CLOEXEC, O_NONBLOCK"));
  }
  pipe_write_end = ends[1];
  if (std::signal(SIGPIPE, SIG_IGN) == SIG_ERR)
    return fail(system_failure(launch_stage::signals, "signal", errno, "SIGPIPE, SIG_IGN"));
  struct sigaction action {};
  action.sa_handler = note_signal;
  // SA_NOCLDSTOP: a program's process that stops is no news; SIGCHLD still comes when it ends.
  action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigfillset(&action.sa_mask);
  for (const int signal : {SIGCHLD, SIGTERM, SIGINT, SIGHUP})
    if (::sigaction(signal, &action, nullptr) != 0)
      return fail(system_failure(launch_stage::signals, "sigaction", errno, "SIGCHLD|SIGTERM|SIGINT|SIGHUP"));
  return signal_source{.fd = ends[0], .drain_fd = drain_signal_pipe};
}

}  // namespace psych::launcher
