#include "channel.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include <ws2tcpip.h>

#include <fmt/format.h>

namespace psych::windows {

namespace {

setup_error socket_failure(std::string_view call, std::string_view what) {
  return system_failure(launch_stage::channel, call, static_cast<DWORD>(::WSAGetLastError()), what);
}

bool is_hex(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isxdigit(c) != 0; });
}

/// The launcher's own variable, read as UTF-8 (both are ASCII when valid).
std::string variable(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  return value == nullptr ? std::string() : std::string(value);
}

}  // namespace

setup_result<host_address> host_address_from_environment() {
  const auto port_text = variable(protocol::host_port_variable);
  unsigned port = 0;
  const auto [end, parsed] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (parsed != std::errc() || end != port_text.data() + port_text.size() || port == 0 || port > 65535)
    return fail(refusal(launch_stage::channel, fmt::format("{} must be the host's loopback port, not {:?}",
                                               protocol::host_port_variable, port_text)));
  auto secret = variable(protocol::host_secret_variable);
  if (secret.size() < 32 || secret.size() > 128 || !is_hex(secret))
    return fail(refusal(launch_stage::channel, fmt::format("{} must be 32 to 128 hex digits", protocol::host_secret_variable)));
  return host_address{static_cast<std::uint16_t>(port), std::move(secret)};
}

setup_result<unique_socket> attach_to_host(const host_address& host, protocol::attached_stream stream) {
  const auto name = name_of(stream);
  unique_socket s(::WSASocketW(AF_INET, SOCK_STREAM, IPPROTO_TCP, nullptr, 0, WSA_FLAG_NO_HANDLE_INHERIT));
  if (s.get() == INVALID_SOCKET) return fail(socket_failure("WSASocketW", name));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = ::htons(host.port);
  address.sin_addr.s_addr = ::htonl(INADDR_LOOPBACK);
  if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0)
    return fail(socket_failure("connect", fmt::format("127.0.0.1:{}, {}", host.port, name)));
  // Frames are written whole and answered: Nagle would only hold each one back.
  const BOOL no_delay = TRUE;
  ::setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, reinterpret_cast<const char*>(&no_delay), sizeof no_delay);
  const auto proof = protocol::encode_frame(protocol::attach_frame{.secret = host.secret, .stream = stream});
  for (std::size_t sent = 0; sent < proof.size();) {
    const int n = ::send(s.get(), proof.data() + sent, static_cast<int>(proof.size() - sent), 0);
    if (n == SOCKET_ERROR) return fail(socket_failure("send", fmt::format("attach, {}", name)));
    sent += static_cast<std::size_t>(n);
  }
  return s;
}

namespace {

setup_result<void> write_all(HANDLE pipe, std::span<const unsigned char> bytes, std::string_view what) {
  for (std::size_t at = 0; at < bytes.size();) {
    const auto chunk = static_cast<DWORD>(std::min<std::size_t>(bytes.size() - at, 1u << 20));
    DWORD written = 0;
    if (!::WriteFile(pipe, bytes.data() + at, chunk, &written, nullptr) || written == 0)
      return fail(last_error(launch_stage::channel, "WriteFile", fmt::format("the handover pipe, {}", what)));
    at += written;
  }
  return success();
}

}  // namespace

setup_result<void> hand_channel_over(SOCKET channel, std::int64_t child_pid, unique_handle handover,
                                     std::span<const unsigned char> bootstrap) {
  WSAPROTOCOL_INFOW shared{};
  if (::WSADuplicateSocketW(channel, static_cast<DWORD>(child_pid), &shared) != 0)
    return fail(socket_failure("WSADuplicateSocketW", fmt::format("channel, pid {}", child_pid)));
  PSYCH_TRY(write_all(handover.get(), {reinterpret_cast<const unsigned char*>(&shared), sizeof shared}, "the channel"));
  return write_all(handover.get(), bootstrap, "the bootstrap");
}

control_channel::control_channel(unique_socket socket)
    : socket_(std::move(socket)), reader_(protocol::stream_bounds{.max_frame_bytes = control_frame_bytes}) {}

setup_result<bool> control_channel::receive_once() {
  char buffer[16384];
  const int n = ::recv(socket_.get(), buffer, sizeof buffer, 0);
  if (n == SOCKET_ERROR) {
    if (::WSAGetLastError() == WSAEWOULDBLOCK) return true;
    return fail(socket_failure("recv", "control"));
  }
  if (n == 0) {
    closed_ = true;
    return false;
  }
  auto fed = reader_.feed({buffer, static_cast<std::size_t>(n)}, [this](std::string_view line) {
    lines_.emplace_back(line);
  });
  if (!fed) return fail(from_error(launch_stage::protocol, fed.error()));
  return true;
}

setup_result<std::optional<std::string>> control_channel::read_line() {
  while (lines_.empty()) {
    if (closed_) return std::optional<std::string>();
    PSYCH_TRY(receive_once());
  }
  return next_line();
}

setup_result<bool> control_channel::receive() {
  if (closed_) return false;
  return receive_once();
}

std::optional<std::string> control_channel::next_line() {
  if (lines_.empty()) return std::nullopt;
  auto line = std::move(lines_.front());
  lines_.pop_front();
  return line;
}

setup_result<void> control_channel::write_bytes(std::string_view bytes) {
  for (std::size_t sent = 0; sent < bytes.size();) {
    const int n = ::send(socket_.get(), bytes.data() + sent, static_cast<int>(bytes.size() - sent), 0);
    if (n != SOCKET_ERROR) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (::WSAGetLastError() != WSAEWOULDBLOCK) return fail(socket_failure("send", "control"));
    // Non-blocking once supervision watches the socket's events: wait until it takes more.
    fd_set writable;
    FD_ZERO(&writable);
    FD_SET(socket_.get(), &writable);
    if (::select(0, nullptr, &writable, nullptr, nullptr) == SOCKET_ERROR)
      return fail(socket_failure("select", "control"));
  }
  return success();
}

}  // namespace psych::windows
