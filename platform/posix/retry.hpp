#pragma once
// A POSIX call asked again until a signal no longer interrupts it (EINTR), and a whole buffer moved
// by as many reads or writes as it takes. Header-only and free of the library's other headers: the
// launchers are static binaries that carry nothing they can avoid, and the host uses it too.
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace psych::posix {

/// Calls `call` again while it fails with EINTR; its last result, with errno as that call left it.
template <class Call>
auto retry_on_eintr(Call&& call) {
  for (;;) {
    const auto result = call();
    if (result >= 0 || errno != EINTR) return result;
  }
}

/// How far moving a whole buffer got: `done` bytes, and the errno of the call that failed, or 0
/// when none did (then `done` falls short only where a read met the end of the file, or a write
/// moved nothing).
struct transfer {
  std::size_t done = 0;
  int error = 0;
};

/// Calls `step(done)` (a read or write of the bytes from `done` on, returning ssize_t) until `size`
/// bytes are moved, one fails, or one moves nothing. Interrupted calls are retried.
template <class Step>
transfer transfer_all(std::size_t size, Step&& step) {
  transfer moved;
  while (moved.done < size) {
    const ssize_t n = retry_on_eintr([&] { return step(moved.done); });
    if (n < 0) moved.error = errno;
    if (n <= 0) break;
    moved.done += static_cast<std::size_t>(n);
  }
  return moved;
}

inline transfer read_all(int fd, void* buffer, std::size_t size) {
  auto* bytes = static_cast<char*>(buffer);
  return transfer_all(size, [&](std::size_t done) { return ::read(fd, bytes + done, size - done); });
}

inline transfer pread_all(int fd, void* buffer, std::size_t size, off_t offset) {
  auto* bytes = static_cast<char*>(buffer);
  return transfer_all(size, [&](std::size_t done) {
    return ::pread(fd, bytes + done, size - done, offset + static_cast<off_t>(done));
  });
}

inline transfer write_all(int fd, const void* buffer, std::size_t size) {
  const auto* bytes = static_cast<const char*>(buffer);
  return transfer_all(size, [&](std::size_t done) { return ::write(fd, bytes + done, size - done); });
}

inline transfer pwrite_all(int fd, const void* buffer, std::size_t size, off_t offset) {
  const auto* bytes = static_cast<const char*>(buffer);
  return transfer_all(size, [&](std::size_t done) {
    return ::pwrite(fd, bytes + done, size - done, offset + static_cast<off_t>(done));
  });
}

/// send() of the whole buffer with `flags` (MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE).
inline transfer send_all(int socket, const void* buffer, std::size_t size, int flags) {
  const auto* bytes = static_cast<const char*>(buffer);
  return transfer_all(size, [&](std::size_t done) { return ::send(socket, bytes + done, size - done, flags); });
}

}  // namespace psych::posix
