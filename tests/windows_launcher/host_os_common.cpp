// What both hosts of host_os.hpp share: loopback TCP over Berkeley sockets, Winsock's few
// differences kept here side by side.
#ifdef _WIN32
#include <winsock2.h>
#include <ws2tcpip.h>
#else
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#endif

#include <algorithm>
#include <stdexcept>

#include "host_os.hpp"

namespace psych::testing::windows::os {

namespace {

#ifdef _WIN32
using native_socket = SOCKET;
constexpr int send_flags = 0;
using length_type = int;

std::string last_socket_error(const char* call) {
  return std::string(call) + " failed: Winsock error " + std::to_string(::WSAGetLastError());
}

/// Winsock, started once for the test binary; no socket of the host's is inheritable (sockets
/// are by default on Windows), so none reaches the launcher.
native_socket tcp_socket() {
  static const bool started = [] {
    WSADATA data{};
    if (::WSAStartup(MAKEWORD(2, 2), &data) != 0) throw std::runtime_error("WSAStartup failed");
    return true;
  }();
  (void)started;
  return ::WSASocketW(AF_INET, SOCK_STREAM, IPPROTO_TCP, nullptr, 0, WSA_FLAG_NO_HANDLE_INHERIT);
}

native_socket accepted(native_socket listener) {
  const SOCKET socket = ::accept(listener, nullptr, nullptr);
  if (socket != INVALID_SOCKET) ::SetHandleInformation(reinterpret_cast<HANDLE>(socket), HANDLE_FLAG_INHERIT, 0);
  return socket;
}

bool poll_readable(native_socket socket, int milliseconds) {
  WSAPOLLFD p{};
  p.fd = socket;
  p.events = POLLRDNORM;
  return ::WSAPoll(&p, 1, milliseconds) > 0;
}

void close_native(native_socket socket) { ::closesocket(socket); }
#else
using native_socket = int;
constexpr int send_flags = MSG_NOSIGNAL;
using length_type = socklen_t;

std::string last_socket_error(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

native_socket tcp_socket() { return ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); }

native_socket accepted(native_socket listener) { return ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC); }

bool poll_readable(native_socket socket, int milliseconds) {
  pollfd p{socket, POLLIN, 0};
  return ::poll(&p, 1, milliseconds) > 0;
}

void close_native(native_socket socket) { ::close(socket); }
#endif

native_socket native(socket_handle socket) { return static_cast<native_socket>(socket); }

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

/// One call's worth of bytes: Winsock counts in int.
int chunk(std::size_t size) { return static_cast<int>(std::min<std::size_t>(size, std::size_t{1} << 20)); }

}  // namespace

socket_handle listen_on_loopback(std::uint16_t& port) {
  const native_socket socket = tcp_socket();
  if (socket == native(no_socket)) throw std::runtime_error(last_socket_error("socket"));
  auto address = loopback(0);
  length_type length = sizeof address;
  if (::bind(socket, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(socket, 8) != 0 ||
      ::getsockname(socket, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const auto text = last_socket_error("bind/listen");
    close_native(socket);
    throw std::runtime_error(text);
  }
  port = ntohs(address.sin_port);
  return socket;
}

socket_handle accept_connection(socket_handle listener) { return accepted(native(listener)); }

socket_handle connect_to_loopback(std::uint16_t port) {
  const native_socket socket = tcp_socket();
  if (socket == native(no_socket)) return no_socket;
  const auto address = loopback(port);
  if (::connect(socket, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    close_native(socket);
    return no_socket;
  }
  return socket;
}

bool readable_before(socket_handle socket, deadline until) {
  return poll_readable(native(socket), milliseconds_until(until));
}

std::ptrdiff_t receive_some(socket_handle socket, char* buffer, std::size_t size) {
  return ::recv(native(socket), buffer, chunk(size), 0);
}

bool send_all(socket_handle socket, std::string_view bytes) {
  while (!bytes.empty()) {
    const auto n = ::send(native(socket), bytes.data(), chunk(bytes.size()), send_flags);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

void close_socket(socket_handle socket) { close_native(native(socket)); }

}  // namespace psych::testing::windows::os
