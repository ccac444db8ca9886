#pragma once
// Small POSIX helpers the host shares: an owning descriptor, descriptor pairs that are owned
// from the moment the kernel hands them out, and the name of a signal for messages.
//
// Where Linux has an atomic close-on-exec flag (SOCK_CLOEXEC, pipe2) macOS does not: there the
// flag is set right after, and what closes the window is how the host starts processes
// (child_process_posix.cpp: POSIX_SPAWN_CLOEXEC_DEFAULT, so a child inherits only what it is given).
#include <fcntl.h>
#include <stdio.h>  // renameat2 (glibc), renameatx_np (macOS)
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <cstdint>
#include <string>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "psych/result.hpp"

namespace psych::host {

/// A file descriptor closed when its owner goes, whatever path the code takes out.
class unique_fd {
 public:
  unique_fd() noexcept = default;
  explicit unique_fd(int fd) noexcept : fd_{fd} {}
  unique_fd(unique_fd&& other) noexcept : fd_{std::exchange(other.fd_, -1)} {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
  /// Hands the descriptor to a new owner (an Asio object, a spawned process's layout).
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

/// system_call_failed: "<call>(<what>): <the system's words for error>".
inline auto call_failed(std::string_view call, std::string_view what, int error = errno) {
  return fail_with(error_kind::system_call_failed, fmt::format("{}({}): {}", call, what, std::strerror(error)));
}

/// Two ends of a socketpair or a pipe, each owned.
struct fd_pair {
  unique_fd first;   ///< a pipe's read end
  unique_fd second;  ///< a pipe's write end
};

/// Both ends marked close-on-exec, where the kernel could not mark them as it made them (macOS).
inline result<fd_pair> marked_cloexec(fd_pair pair) {
  for (const unique_fd* end : {&pair.first, &pair.second})
    if (::fcntl(end->get(), F_SETFD, FD_CLOEXEC) != 0)
      return fail_with(error_kind::system_call_failed, fmt::format("fcntl(F_SETFD, FD_CLOEXEC): {}", std::strerror(errno)));
  return pair;
}

/// socketpair(AF_UNIX, type | SOCK_CLOEXEC): both ends owned the moment they exist.
inline result<fd_pair> unix_socket_pair(int type = SOCK_STREAM) {
  int fds[2];
#ifdef SOCK_CLOEXEC
  if (::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, fds) != 0)
    return fail_with(error_kind::system_call_failed, fmt::format("socketpair(AF_UNIX): {}", std::strerror(errno)));
  return fd_pair{unique_fd{fds[0]}, unique_fd{fds[1]}};
#else
  if (::socketpair(AF_UNIX, type, 0, fds) != 0)
    return fail_with(error_kind::system_call_failed, fmt::format("socketpair(AF_UNIX): {}", std::strerror(errno)));
  return marked_cloexec(fd_pair{unique_fd{fds[0]}, unique_fd{fds[1]}});
#endif
}

/// pipe2(O_CLOEXEC): the read end first, both owned the moment they exist.
inline result<fd_pair> cloexec_pipe() {
  int fds[2];
#ifdef __linux__
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return fail_with(error_kind::system_call_failed, fmt::format("pipe2(O_CLOEXEC): {}", std::strerror(errno)));
  return fd_pair{unique_fd{fds[0]}, unique_fd{fds[1]}};
#else
  if (::pipe(fds) != 0) return fail_with(error_kind::system_call_failed, fmt::format("pipe: {}", std::strerror(errno)));
  return marked_cloexec(fd_pair{unique_fd{fds[0]}, unique_fd{fds[1]}});
#endif
}

/// rename() that fails with EEXIST rather than replace `to`: renameat2(RENAME_NOREPLACE) on Linux,
/// renameatx_np(RENAME_EXCL) on macOS. -1 with errno set on failure.
inline int rename_no_replace(int from_dir, const char* from, int to_dir, const char* to) {
#ifdef __linux__
  return ::renameat2(from_dir, from, to_dir, to, RENAME_NOREPLACE);
#else
  return ::renameatx_np(from_dir, from, to_dir, to, RENAME_EXCL);
#endif
}

}  // namespace psych::host
