// json_rpc_streams.hpp on POSIX: non-blocking descriptors and poll().
#include "mcp/json_rpc_streams.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#ifdef __linux__
#include <sys/eventfd.h>
#endif
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

namespace psych::host {

/// A flag a thread's poll() wakes on, and stays readable once raised (nobody reads it): an eventfd
/// on Linux, a pipe elsewhere (macOS has no eventfd). (Not in the anonymous namespace: the
/// streams' state, which has external linkage, holds two.)
struct wake_flag {
  unique_fd poll_end;   ///< what poll() watches
  unique_fd raise_end;  ///< what raise() writes to; none on Linux, where it is poll_end

  bool open() noexcept {
#ifdef __linux__
    poll_end.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    return poll_end.valid();
#else
    int ends[2];
    if (::pipe(ends) != 0) return false;
    poll_end.reset(ends[0]);
    raise_end.reset(ends[1]);
    for (const int fd : ends)
      if (::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 || ::fcntl(fd, F_SETFL, O_NONBLOCK) != 0) return false;
    return true;
#endif
  }
  void raise() const noexcept {
    const std::uint64_t one = 1;
    (void)!::write(raise_end.valid() ? raise_end.get() : poll_end.get(), &one, sizeof one);
  }
};

namespace {

bool set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

int poll_ms(std::chrono::steady_clock::duration left) {
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(ms, 0, 60'000));
}

}  // namespace

struct peer_streams::impl {
  unique_fd input, output, side;
  int gone = -1;  ///< not owned
  wake_flag wake_reader, wake_writer;
  bool side_watched = true;
  std::string buffer = std::string(std::size_t{64} << 10, '\0');

  /// Reads what `fd` has now, without waiting, and at most 16 buffers of it.
  drained drain(int fd, const sink& to) {
    for (int round = 0; round < 16;) {
      const ssize_t n = ::read(fd, buffer.data(), buffer.size());
      if (n > 0) {
        if (!to(std::string_view{buffer.data(), static_cast<std::size_t>(n)})) return drained::ended;
        ++round;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      return n < 0 && errno == EAGAIN ? drained::empty : drained::ended;
    }
    return drained::more;
  }
};

peer_streams::peer_streams(std::unique_ptr<impl> state) : impl_{std::move(state)} {}
peer_streams::~peer_streams() = default;

result<std::unique_ptr<peer_streams>> peer_streams::open(os_handle input, os_handle output, os_handle side,
                                                         os_handle gone) {
  auto state = std::make_unique<impl>();
  state->input.reset(input);
  state->output.reset(output);
  state->side.reset(side);
  state->gone = gone;
  if (!state->wake_reader.open() || !state->wake_writer.open())
    return fail_with(error_kind::system_call_failed, fmt::format("eventfd: {}", std::strerror(errno)));
  for (const int fd : {input, output, side})
    if (fd >= 0 && !set_nonblocking(fd))
      return fail_with(error_kind::system_call_failed, fmt::format("fcntl(O_NONBLOCK): {}", std::strerror(errno)));
  return std::unique_ptr<peer_streams>{new peer_streams{std::move(state)}};
}

void peer_streams::prepare_writer_thread() noexcept {
  // The signal is directed at this thread, and one left pending goes with it.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
}

result<peer_streams::ready> peer_streams::wait() {
  impl& s = *impl_;
  pollfd fds[4] = {{s.input.get(), POLLIN, 0},
                   {s.side_watched ? s.side.get() : -1, POLLIN, 0},
                   {s.wake_reader.poll_end.get(), POLLIN, 0},
                   {s.gone, POLLIN, 0}};
  while (::poll(fds, 4, -1) < 0)
    if (errno != EINTR) return fail_with(error_kind::system_call_failed, fmt::format("poll: {}", std::strerror(errno)));
  return ready{.input = fds[0].revents != 0,
               .side = fds[1].revents != 0,
               .gone = fds[3].revents != 0,
               .woken = fds[2].revents != 0};
}

peer_streams::drained peer_streams::drain_input(const sink& to) { return impl_->drain(impl_->input.get(), to); }

peer_streams::drained peer_streams::drain_side(const sink& to) {
  return impl_->side.valid() ? impl_->drain(impl_->side.get(), to) : drained::ended;
}

void peer_streams::forget_side() noexcept { impl_->side_watched = false; }

void peer_streams::wake_reader() noexcept { impl_->wake_reader.raise(); }

peer_streams::write_attempt peer_streams::try_write(std::string_view bytes, std::chrono::steady_clock::time_point) {
  for (;;) {
    const ssize_t n = ::write(impl_->output.get(), bytes.data(), bytes.size());
    if (n >= 0) return {.bytes = static_cast<std::size_t>(n), .would_block = n == 0};
    if (errno == EINTR) continue;
    if (errno == EAGAIN) return {.would_block = true};
    return {.failed = std::string{std::strerror(errno)}};
  }
}

bool peer_streams::write_in_flight() const noexcept { return false; }

bool peer_streams::wait_writable(std::chrono::steady_clock::time_point deadline) {
  pollfd fds[2] = {{impl_->output.get(), POLLOUT, 0}, {impl_->wake_writer.poll_end.get(), POLLIN, 0}};
  return !(::poll(fds, 2, poll_ms(deadline - std::chrono::steady_clock::now())) > 0 && fds[1].revents != 0);
}

void peer_streams::wake_writer() noexcept { impl_->wake_writer.raise(); }

void peer_streams::close_output() noexcept { impl_->output.reset(); }

}  // namespace psych::host
