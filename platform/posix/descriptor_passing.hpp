#pragma once
// Descriptors sent over a Unix socket (SCM_RIGHTS): one byte of data carrying them, so a message
// is never empty and its arrival is unmistakable. Header-only and free of the library's other
// headers, like retry.hpp: the launchers and the host both use it.
#include <sys/socket.h>
#include <sys/types.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <span>
#include <vector>

#include "platform/posix/retry.hpp"

namespace psych::posix {

/// One byte of data and room for `Most` descriptors: the message both directions use. Not movable:
/// the message points into it.
template <std::size_t Most>
struct one_byte_message {
  explicit one_byte_message(char byte) : marker(byte) {
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control.data();
    message.msg_controllen = control.size();
  }
  one_byte_message(const one_byte_message&) = delete;
  one_byte_message& operator=(const one_byte_message&) = delete;
  char marker;
  iovec part{&marker, 1};
  alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int) * Most)> control{};
  msghdr message{};
};

/// Sends `fds` (at most `Most`) in one message. 0, or the errno of the failed sendmsg.
template <std::size_t Most>
int send_descriptors(int socket, std::span<const int> fds) {
  if (fds.empty() || fds.size() > Most) return EINVAL;
  one_byte_message<Most> held('F');
  msghdr& message = held.message;
  message.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
#ifdef MSG_NOSIGNAL
  constexpr int flags = MSG_NOSIGNAL;
#else
  constexpr int flags = 0;  // macOS: the socket itself is marked SO_NOSIGPIPE
#endif
  return retry_on_eintr([&] { return ::sendmsg(socket, &message, flags); }) == 1 ? 0 : errno;
}

/// What one message brought: its descriptors (close-on-exec, owned by the caller) and whether it
/// arrived whole. `error` is recvmsg's errno, 0 when it succeeded; `ended` when the peer had closed.
struct received_descriptors {
  std::vector<int> fds;
  int error = 0;
  bool ended = false;
  bool whole = false;  ///< one byte, no truncated control data
};

/// Receives one message of at most `Most` descriptors. `flags` are recvmsg's (MSG_DONTWAIT for a
/// message that must already be there). A message cut short keeps no descriptor: all are closed.
template <std::size_t Most>
received_descriptors receive_descriptors(int socket, int flags = 0) {
  received_descriptors out;
  one_byte_message<Most> held(0);
  msghdr& message = held.message;
#ifdef MSG_CMSG_CLOEXEC
  flags |= MSG_CMSG_CLOEXEC;
#endif
  const ssize_t n = retry_on_eintr([&] { return ::recvmsg(socket, &message, flags); });
  if (n < 0) {
    out.error = errno;
    return out;
  }
  out.ended = n == 0;
  for (cmsghdr* h = CMSG_FIRSTHDR(&message); h != nullptr; h = CMSG_NXTHDR(&message, h))
    if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS)
      for (std::size_t i = 0; i < (h->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
        out.fds.push_back(fd);
      }
  out.whole = n == 1 && (message.msg_flags & MSG_CTRUNC) == 0;
  if (!out.whole) {
    for (const int fd : out.fds) ::close(fd);
    out.fds.clear();
  }
  return out;
}

}  // namespace psych::posix
