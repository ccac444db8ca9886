#include "fds.hpp"

#include <cerrno>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

namespace psych::launcher {

setup_result<void> check_inherited_fds() {
  for (int fd = 0; fd <= channel_fd; ++fd)
    if (::fcntl(fd, F_GETFD) < 0) return fail(system_failure("fds", "fcntl", errno, fmt::format("{}, F_GETFD", fd)));
  return success();
}

setup_result<void> arrange_child_fds(int bootstrap) {
  // In this order: the channel leaves fd 4 before the bootstrap takes it. A memfd at or below 4
  // would be clobbered by these very dup2s; it cannot be, since 0-4 were open when it was made.
  if (bootstrap <= child_bootstrap_fd)
    return fail(refusal("fds", fmt::format("the bootstrap memfd is fd {}, inside the child's layout", bootstrap)));
  if (::dup2(channel_fd, child_channel_fd) < 0)
    return fail(system_failure("fds", "dup2", errno, fmt::format("{}, {}", channel_fd, child_channel_fd)));
  if (::dup2(bootstrap, child_bootstrap_fd) < 0)
    return fail(system_failure("fds", "dup2", errno, fmt::format("{}, {}", bootstrap, child_bootstrap_fd)));
  // dup2 clears FD_CLOEXEC on the new fd; 0-2 are cleared too in case the host set it.
  for (int fd = 0; fd < child_channel_fd; ++fd)
    if (::fcntl(fd, F_SETFD, 0) < 0) return fail(system_failure("fds", "fcntl", errno, fmt::format("{}, F_SETFD, 0", fd)));
  // CLOSE_RANGE_CLOEXEC needs Linux 5.11.
  if (::close_range(child_bootstrap_fd + 1, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
    return fail(system_failure("fds", "close_range", errno, "5, ~0U, CLOSE_RANGE_CLOEXEC"));
  return success();
}

setup_result<void> detach_launcher_fds() {
  if (::close(channel_fd) != 0) return fail(system_failure("fds", "close", errno, "4"));
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null < 0) return fail(system_failure("fds", "open", errno, "/dev/null"));
  for (const int fd : {1, 2}) {
    if (::dup2(null, fd) < 0) {
      const int saved = errno;
      ::close(null);
      return fail(system_failure("fds", "dup2", saved, fmt::format("/dev/null, {}", fd)));
    }
  }
  ::close(null);
  return success();
}

}  // namespace psych::launcher
