#include "fds.hpp"

#include <cerrno>
#include <charconv>
#include <string_view>

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

namespace psych::launcher {

setup_result<void> check_inherited_fds() {
  for (int fd = 0; fd <= channel_fd; ++fd)
    if (::fcntl(fd, F_GETFD) < 0) return fail(system_failure(launch_stage::fds, "fcntl", errno, fmt::format("{}, F_GETFD", fd)));
  return success();
}

setup_result<void> arrange_child_fds(int bootstrap) {
  // In this order: the channel leaves fd 4 before the bootstrap takes it. A memfd at or below 4
  // would be clobbered by these very dup2s; it cannot be, since 0-4 were open when it was made.
  if (bootstrap <= child_bootstrap_fd)
    return fail(refusal(launch_stage::fds, fmt::format("the bootstrap memfd is fd {}, inside the child's layout", bootstrap)));
  if (::dup2(channel_fd, child_channel_fd) < 0)
    return fail(system_failure(launch_stage::fds, "dup2", errno, fmt::format("{}, {}", channel_fd, child_channel_fd)));
  if (::dup2(bootstrap, child_bootstrap_fd) < 0)
    return fail(system_failure(launch_stage::fds, "dup2", errno, fmt::format("{}, {}", bootstrap, child_bootstrap_fd)));
  // dup2 clears FD_CLOEXEC on the new fd; 0-2 are cleared too in case the host set it.
  for (int fd = 0; fd < child_channel_fd; ++fd)
    if (::fcntl(fd, F_SETFD, 0) < 0) return fail(system_failure(launch_stage::fds, "fcntl", errno, fmt::format("{}, F_SETFD, 0", fd)));
  return mark_close_on_exec_from(child_bootstrap_fd + 1);
}

setup_result<void> mark_close_on_exec_from(int first) {
#ifdef CLOSE_RANGE_CLOEXEC
  // One call, whatever the descriptor table's size (Linux 5.11).
  if (::close_range(static_cast<unsigned>(first), ~0U, CLOSE_RANGE_CLOEXEC) != 0)
    return fail(system_failure(launch_stage::fds, "close_range", errno, fmt::format("{}, ~0U, CLOSE_RANGE_CLOEXEC", first)));
  return success();
#else
  return mark_listed_close_on_exec_from(first);
#endif
}

setup_result<void> mark_listed_close_on_exec_from(int first) {
  // /dev/fd lists exactly the open descriptors (Linux: a link to /proc/self/fd; macOS: fdescfs),
  // where a loop up to the descriptor limit would make a million calls under a high RLIMIT_NOFILE.
  DIR* listing = ::opendir("/dev/fd");
  if (listing == nullptr) return fail(system_failure(launch_stage::fds, "opendir", errno, "/dev/fd"));
  const int own = ::dirfd(listing);
  while (const dirent* entry = ::readdir(listing)) {
    const std::string_view name = entry->d_name;
    int fd = -1;
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), fd);
    if (ec != std::errc{} || end != name.data() + name.size() || fd < first || fd == own) continue;
    // EBADF: a descriptor the listing showed is gone (on macOS the listing's own, in a race with
    // nothing else, since the child is single-threaded); there is nothing left to mark.
    if (::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 && errno != EBADF) {
      const int saved = errno;
      ::closedir(listing);
      return fail(system_failure(launch_stage::fds, "fcntl", saved, fmt::format("{}, F_SETFD, FD_CLOEXEC", fd)));
    }
  }
  ::closedir(listing);
  return success();
}

setup_result<void> detach_launcher_fds() {
  if (::close(channel_fd) != 0) return fail(system_failure(launch_stage::fds, "close", errno, "4"));
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null < 0) return fail(system_failure(launch_stage::fds, "open", errno, "/dev/null"));
  for (const int fd : {1, 2}) {
    if (::dup2(null, fd) < 0) {
      const int saved = errno;
      ::close(null);
      return fail(system_failure(launch_stage::fds, "dup2", saved, fmt::format("/dev/null, {}", fd)));
    }
  }
  ::close(null);
  return success();
}

}  // namespace psych::launcher
