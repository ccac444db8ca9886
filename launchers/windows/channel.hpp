#pragma once
// The launcher's two connections to the host (docs/contract.md, "Channels on Windows"): loopback
// TCP to the port the host gave in PSYCH_HOST_PORT, each proving PSYCH_HOST_SECRET with an
// `attach` frame first. Control stays the launcher's; the channel is handed to the child the way
// Winsock documents for sharing a socket with another process (WSADuplicateSocketW), not by handle
// inheritance, which layered providers (and Wine) do not carry across.
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>

#include <winsock2.h>

#include "setup_error.hpp"
#include "handles.hpp"
#include "psych/protocol/attach.hpp"
#include "psych/protocol/json.hpp"
#include "psych/protocol/line_reader.hpp"

namespace psych::windows {

/// The control channel's frame ceiling (docs/contract.md: control frames are 1 MiB).
inline constexpr std::size_t control_frame_bytes = std::size_t{1} << 20;

/// Where the host listens, and what the launcher proves to it.
struct host_address {
  std::uint16_t port = 0;
  std::string secret;
};

/// Reads PSYCH_HOST_PORT and PSYCH_HOST_SECRET (32 to 128 hex digits) from the launcher's own
/// environment; none of it reaches the child, whose environment is built from nothing.
setup_result<host_address> host_address_from_environment();

struct socket_traits {
  using type = SOCKET;
  static constexpr SOCKET empty = INVALID_SOCKET;
  static bool valid(SOCKET s) noexcept { return s != INVALID_SOCKET; }
  static void release(SOCKET s) noexcept { ::closesocket(s); }
};

/// One SOCKET, closed with the object that owns it.
using unique_socket = unique_resource<socket_traits>;

/// Connects to 127.0.0.1:port and sends the `attach` frame for `stream`. Neither socket is
/// inheritable.
setup_result<unique_socket> attach_to_host(const host_address& host, protocol::attached_stream stream);

/// Shares `channel` with the process `child_pid` and writes, into the handover pipe, the
/// WSAPROTOCOL_INFOW the child makes its socket from (WSASocketW with FROM_PROTOCOL_INFO; CPython's
/// socket.fromshare), then `bootstrap` (the precompiled bootstrap the loader runs). The write end
/// closes here: the child reads those bytes, then end of file. The pipe is made to hold them all;
/// where Windows buffers less, the write waits for the child to read, and a child that died
/// fails it, as the launcher holds no read end.
setup_result<void> hand_channel_over(SOCKET channel, std::int64_t child_pid, unique_handle handover,
                                     std::span<const unsigned char> bootstrap);

/// NDJSON frames on the control connection, read through the bounded line_reader.
class control_channel {
 public:
  explicit control_channel(unique_socket socket);

  [[nodiscard]] SOCKET socket() const noexcept { return socket_.get(); }

  /// Blocks until one whole line has arrived. nullopt: the host closed the connection first.
  setup_result<std::optional<std::string>> read_line();

  /// What has arrived, without blocking: call it when the socket's event says it is readable.
  /// Whole lines are queued for next_line(). Returns false once the host has closed its end.
  setup_result<bool> receive();

  /// The oldest queued line, if any.
  std::optional<std::string> next_line();

  template <class Frame>
  setup_result<void> write(const Frame& frame) {
    return write_bytes(protocol::encode_frame(frame));
  }

 private:
  setup_result<bool> receive_once();
  setup_result<void> write_bytes(std::string_view bytes);

  unique_socket socket_;
  protocol::line_reader reader_;
  std::deque<std::string> lines_;
  bool closed_ = false;
};

}  // namespace psych::windows
