#pragma once
// The network probe's target: listeners on this machine's loopback only, one per family. The
// child tries to reach them while network is denied; a connection that arrives here is
// exposure, whatever the child says it saw.
#include <cstdint>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "psych/grading.hpp"
#include "psych/protocol/frames.hpp"

namespace psych::host {

class loopback_probe {
 public:
  explicit loopback_probe(boost::asio::io_context& io);

  /// Opens a listener on 127.0.0.1 and one on ::1, each on a port the kernel picks, and counts
  /// every connection they accept. A family this host cannot listen on is left out (port 0).
  void open();
  /// The ports for the launch frame; 0 for a family without a listener.
  [[nodiscard]] protocol::probe_ports ports() const;
  /// Connections accepted so far.
  [[nodiscard]] std::uint64_t connections() const noexcept { return connections_; }
  void close();

 private:
  boost::asio::awaitable<void> accept_loop(boost::asio::ip::tcp::acceptor& acceptor);

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor v4_, v6_;
  std::uint64_t connections_ = 0;
};

/// Lowers the network grade of a containment whose network was denied when `connections`
/// reached the host's loopback anyway. Nothing to note when network was granted.
void note_loopback_exposure(containment_grade& grade, network_access network, std::uint64_t connections);

}  // namespace psych::host
