#pragma once
// Small POSIX helpers the host shares: an owning descriptor, descriptor pairs that are owned
// from the moment the kernel hands them out, and the name of a signal for messages.
#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

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

/// Two ends of a socketpair or a pipe, each owned.
struct fd_pair {
  unique_fd first;   ///< a pipe's read end
  unique_fd second;  ///< a pipe's write end
};

/// socketpair(AF_UNIX, type | SOCK_CLOEXEC): both ends owned the moment they exist.
inline result<fd_pair> unix_socket_pair(int type = SOCK_STREAM) {
  int fds[2];
  if (::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, fds) != 0)
    return failure(error_kind::system_call_failed, fmt::format("socketpair(AF_UNIX): {}", std::strerror(errno)));
  return fd_pair{unique_fd{fds[0]}, unique_fd{fds[1]}};
}

/// pipe2(O_CLOEXEC): the read end first, both owned the moment they exist.
inline result<fd_pair> cloexec_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return failure(error_kind::system_call_failed, fmt::format("pipe2(O_CLOEXEC): {}", std::strerror(errno)));
  return fd_pair{unique_fd{fds[0]}, unique_fd{fds[1]}};
}

/// `bytes` bytes from the kernel's random source, as lowercase hex: every id and token the host
/// makes (execution ids, launch tokens, directory and temporary-file names) comes from here.
/// getrandom() without flags only blocks until the pool is first seeded, and fails otherwise
/// only on a kernel without it; that is not an execution's failure, so it throws as
/// std::random_device does.
inline std::string random_hex(std::size_t bytes) {
  std::string raw(bytes, '\0');
  for (std::size_t got = 0; got < bytes;) {
    const ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::system_error(errno, std::generic_category(), "getrandom");
    got += static_cast<std::size_t>(n);
  }
  std::string hex;
  hex.reserve(2 * bytes);
  for (const char byte : raw) hex += fmt::format("{:02x}", static_cast<unsigned char>(byte));
  return hex;
}

/// pread() until `n` bytes are in `out` or the file ends: the count read (less than `n` only at
/// end of file), or -1 with errno set. EINTR and short reads are retried.
inline ssize_t pread_full(int fd, char* out, std::size_t n, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd, out + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return -1;
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  return static_cast<ssize_t>(done);
}

/// "SIGKILL" for 9; "signal 99" for a number this system has no name for.
inline std::string signal_name(long long number) {
  const char* abbreviation = number > 0 && number < NSIG ? ::sigabbrev_np(static_cast<int>(number)) : nullptr;
  return abbreviation ? fmt::format("SIG{}", abbreviation) : fmt::format("signal {}", number);
}

}  // namespace psych::host
