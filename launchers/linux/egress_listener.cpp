#include "egress_listener.hpp"

#include <cerrno>
#include <cstring>

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include "platform/posix/descriptor_passing.hpp"

namespace psych::launcher {

namespace {

constexpr int max_listeners = 2;  // 127.0.0.1 and ::1

setup_error egress_failure(std::string_view call, int error, std::string_view what) {
  return system_failure(launch_stage::egress, call, error, what);
}

/// A new network namespace's loopback is down, and has no address until it comes up.
setup_result<void> bring_loopback_up() {
  const int sock = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return fail(egress_failure("socket", errno, "AF_INET, SOCK_DGRAM"));
  ifreq request{};
  std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
  int error = 0;
  if (::ioctl(sock, SIOCGIFFLAGS, &request) != 0) error = errno;
  // Already up (a container runtime's own namespace): nothing to change, and no right needed to.
  const bool up = error == 0 && (request.ifr_flags & IFF_UP) != 0;
  request.ifr_flags = static_cast<short>(request.ifr_flags | IFF_UP);
  if (error == 0 && !up && ::ioctl(sock, SIOCSIFFLAGS, &request) != 0) error = errno;
  ::close(sock);
  if (error != 0) return fail(egress_failure("ioctl", error, "lo, SIOCSIFFLAGS, IFF_UP"));
  return success();
}

/// A listener on `address`; -1 with errno EADDRNOTAVAIL or EAFNOSUPPORT when the namespace has no
/// IPv6 (a kernel booted without it, or disable_ipv6), which leaves IPv4 alone.
setup_result<int> listen_on(int family, const sockaddr* address, socklen_t size, std::string_view what) {
  const int sock = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) {
    if (family == AF_INET6 && errno == EAFNOSUPPORT) return -1;
    return fail(egress_failure("socket", errno, what));
  }
  const int one = 1;
  if (family == AF_INET6) (void)::setsockopt(sock, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (::bind(sock, address, size) != 0) {
    const int error = errno;
    ::close(sock);
    if (family == AF_INET6 && (error == EADDRNOTAVAIL || error == EAFNOSUPPORT)) return -1;
    return fail(egress_failure("bind", error, what));
  }
  // SOMAXCONN: a program that opens many connections at once waits in the backlog, not refused.
  if (::listen(sock, SOMAXCONN) != 0) {
    const int error = errno;
    ::close(sock);
    return fail(egress_failure("listen", error, what));
  }
  return sock;
}

setup_result<void> send_fds(int socket, const std::vector<int>& fds, std::string_view what) {
  if (const int error = posix::send_descriptors<max_listeners>(socket, fds); error != 0)
    return fail(egress_failure("sendmsg", error, what));
  return success();
}

}  // namespace

setup_result<int> open_egress_listeners(std::uint16_t port, int handover) {
  PSYCH_TRY(bring_loopback_up());
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  v4.sin_port = htons(port);
  v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  v6.sin6_port = htons(port);
  v6.sin6_addr = in6addr_loopback;
  std::vector<int> listeners;
  const auto close_all = [&] {
    for (const int fd : listeners) ::close(fd);
  };
  auto first = listen_on(AF_INET, reinterpret_cast<const sockaddr*>(&v4), sizeof v4, fmt::format("127.0.0.1:{}", port));
  if (!first) return fail(first.error());
  listeners.push_back(first.value());
  auto second = listen_on(AF_INET6, reinterpret_cast<const sockaddr*>(&v6), sizeof v6, fmt::format("[::1]:{}", port));
  if (!second) {
    close_all();
    return fail(second.error());
  }
  if (second.value() >= 0) listeners.push_back(second.value());
  auto sent = send_fds(handover, listeners, "the listeners, to the launcher");
  close_all();
  if (!sent) return fail(sent.error());
  return static_cast<int>(listeners.size());
}

setup_result<int> forward_egress_listeners(int from_init, int to_host) {
  auto received = posix::receive_descriptors<max_listeners>(from_init, MSG_DONTWAIT);
  if (received.error != 0) return fail(egress_failure("recvmsg", received.error, "the listeners, from init"));
  if (received.fds.empty()) return fail(refusal(launch_stage::egress, "init's egress listeners did not arrive whole"));
  auto sent = send_fds(to_host, received.fds, "the listeners, to the host");
  for (const int fd : received.fds) ::close(fd);
  if (!sent) return fail(sent.error());
  return static_cast<int>(received.fds.size());
}

}  // namespace psych::launcher
