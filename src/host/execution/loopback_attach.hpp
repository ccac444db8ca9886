#pragma once
// The host's side of a launcher that attaches over loopback TCP instead of inheriting descriptors
// 3 and 4 (the Windows launcher; docs/contract.md, "Channels on Windows"): a listener on
// 127.0.0.1 at a port of the kernel's choosing and a fresh 128-bit secret, both given to the
// launcher in its environment. A connection counts only once its first line, within
// proof_patience, is an `attach` frame with that secret (compared in constant time) naming the
// stream asked for; anything else is closed and the wait goes on. The first proven connection of
// each stream is the one: the launcher makes both before its child exists, and the listener is
// closed once both are attached, so no later connection (the child's, another account's) is taken.
#include <chrono>
#include <cstdint>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "psych/protocol/attach.hpp"
#include "psych/result.hpp"

namespace psych::host {

class attach_listener {
 public:
  using attached_socket = boost::asio::generic::stream_protocol::socket;
  /// How long one connection may take to prove the secret.
  static constexpr auto proof_patience = std::chrono::seconds(2);
  /// The longest first line taken as a proof: an attach frame is about a hundred bytes.
  static constexpr std::size_t max_proof_bytes = 512;

  explicit attach_listener(boost::asio::io_context& io);

  /// Listens on 127.0.0.1 at a port of the kernel's choosing.
  result<void> open();
  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  [[nodiscard]] const std::string& secret() const noexcept { return secret_; }
  /// Connections closed for not proving the secret (or naming another stream).
  [[nodiscard]] int dropped() const noexcept { return dropped_; }

  /// The first connection that proves the secret for `stream`. Fails once the listener is closed
  /// (close() ends a wait in progress: the launcher ended, or the host gave up on it). Accepted as
  /// a generic stream socket, the type the session reads a Unix socket pair through too: a TCP
  /// socket cannot become one later on Windows, where Asio's release() needs the completion port
  /// let go of it, which Wine does not do (WSAEOPNOTSUPP).
  boost::asio::awaitable<result<attached_socket>> accept(protocol::attached_stream stream);
  void close() noexcept;

 private:
  /// Reads one connection's first line, one byte at a time so that nothing after it (a frame the
  /// launcher sends at once) is taken from the stream; whether it proves `stream`.
  boost::asio::awaitable<bool> proves(attached_socket& connection, protocol::attached_stream stream);

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::uint16_t port_ = 0;
  std::string secret_;
  int dropped_ = 0;
};

}  // namespace psych::host
