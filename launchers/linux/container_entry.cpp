#include "container_entry.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fds.hpp"
#include "psych/protocol/frames.hpp"
#include "platform/posix/descriptor_passing.hpp"

namespace psych::launcher {
namespace {

constexpr std::size_t token_bytes_max = 128;
// stdout, stderr, control, channel; and for network=allowlist the egress handover.
constexpr int handed_over = 5;
constexpr int handed_over_least = 4;
constexpr int last_layout_fd = protocol::egress_handover_fd;

setup_result<std::string> read_token() {
  std::string token;
  for (;;) {
    char byte = 0;
    const ssize_t n = posix::retry_on_eintr([&] { return ::read(0, &byte, 1); });
    if (n < 0) return fail(system_failure(launch_stage::container, "read", errno, "0 (the token)"));
    if (n == 0 || byte == '\n') break;
    if (token.size() == token_bytes_max) return fail(refusal(launch_stage::container, "the token on stdin is too long"));
    token.push_back(byte);
  }
  if (token.empty()) return fail(refusal(launch_stage::container, "no token arrived on stdin"));
  return token;
}

setup_result<void> send_token(int fd, const std::string& bytes) {
  if (const auto sent = posix::send_all(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL); sent.done < bytes.size())
    return fail(system_failure(launch_stage::container, "send", sent.error != 0 ? sent.error : EIO, "the token"));
  return success();
}

/// One message carrying four descriptors, or five, received close-on-exec; how many.
setup_result<int> receive_into(int socket, int (&fds)[handed_over]) {
  auto received = posix::receive_descriptors<handed_over>(socket);
  if (received.error != 0) return fail(system_failure(launch_stage::container, "recvmsg", received.error, "the descriptors"));
  const auto count = received.fds.size();
  if (count != handed_over && count != handed_over_least) {
    // Whatever did arrive is closed: a short or odd answer is never half used.
    for (const int fd : received.fds) ::close(fd);
    return fail(refusal(launch_stage::container, "the worker's answer was not four or five descriptors"));
  }
  std::copy(received.fds.begin(), received.fds.end(), fds);
  return static_cast<int>(count);
}

/// The same descriptor, moved above the contract's layout (0-4) so the dup2s that build the layout
/// cannot overwrite it. A container starts with only 0-2 open: the first descriptors this entry
/// makes would otherwise be 3 and 4.
setup_result<int> above_layout(int fd) {
  if (fd > last_layout_fd) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, last_layout_fd + 1);
  const int saved = errno;
  ::close(fd);
  if (moved < 0) return fail(system_failure(launch_stage::container, "fcntl", saved, "F_DUPFD_CLOEXEC, 6"));
  return moved;
}

}  // namespace

setup_result<void> receive_descriptors(const char* socket_path) {
  PSYCH_TRY(auto token, read_token());
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (std::strlen(socket_path) >= sizeof address.sun_path)
    return fail(refusal(launch_stage::container, "the socket path is too long"));
  std::strcpy(address.sun_path, socket_path);
  const int made = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (made < 0) return fail(system_failure(launch_stage::container, "socket", errno, "AF_UNIX"));
  PSYCH_TRY(const int socket, above_layout(made));
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } hold{socket};
  if (::connect(socket, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0)
    return fail(system_failure(launch_stage::container, "connect", errno, socket_path));
  PSYCH_TRY(send_token(socket, token + "\n"));
  int fds[handed_over] = {-1, -1, -1, -1, -1};
  PSYCH_TRY(const int received, receive_into(socket, fds));

  // Into place: 1 stdout, 2 stderr, 3 control, 4 channel (and 5, the egress handover), each
  // inherited as the host would have left it (dup2 clears close-on-exec; the launcher marks what
  // the child must not get).
  const int opened = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (opened < 0) return fail(system_failure(launch_stage::container, "open", errno, "/dev/null"));
  PSYCH_TRY(const int null, above_layout(opened));
  const int targets[handed_over] = {1, 2, control_fd, channel_fd, protocol::egress_handover_fd};
  for (int i = 0; i < received; ++i) {
    auto moved = above_layout(fds[i]);
    if (!moved) return fail(moved.error());
    fds[i] = moved.value();
  }
  for (int i = 0; i < received; ++i) {
    if (::dup2(fds[i], targets[i]) < 0) return fail(system_failure(launch_stage::container, "dup2", errno, "a handed-over fd"));
    ::close(fds[i]);
  }
  if (::dup2(null, 0) < 0) return fail(system_failure(launch_stage::container, "dup2", errno, "/dev/null, 0"));
  ::close(null);
  return success();
}

}  // namespace psych::launcher
