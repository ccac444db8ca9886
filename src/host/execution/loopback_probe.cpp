#include "execution/loopback_probe.hpp"

#include <algorithm>
#include <string>
#include <string_view>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

namespace psych::host {

namespace asio = boost::asio;

loopback_probe::loopback_probe(asio::io_context& io) : io_(io), v4_(io), v6_(io) {}

void loopback_probe::open() {
  const auto listen = [this](asio::ip::tcp::acceptor& acceptor, const asio::ip::address& loopback) {
    boost::system::error_code ec;
    acceptor.open(loopback.is_v4() ? asio::ip::tcp::v4() : asio::ip::tcp::v6(), ec);
    if (!ec) acceptor.bind({loopback, 0}, ec);
    if (!ec) acceptor.listen(16, ec);
    if (ec) acceptor.close(ec);
    else asio::co_spawn(io_, accept_loop(acceptor), asio::detached);
  };
  listen(v4_, asio::ip::address_v4::loopback());
  listen(v6_, asio::ip::address_v6::loopback());
}

protocol::probe_ports loopback_probe::ports() const {
  const auto port_of = [](const asio::ip::tcp::acceptor& acceptor) -> std::int64_t {
    boost::system::error_code ec;
    return acceptor.is_open() ? acceptor.local_endpoint(ec).port() : 0;
  };
  return {.ipv4_port = port_of(v4_), .ipv6_port = port_of(v6_)};
}

void loopback_probe::close() {
  boost::system::error_code ec;
  v4_.close(ec);
  v6_.close(ec);
}

asio::awaitable<void> loopback_probe::accept_loop(asio::ip::tcp::acceptor& acceptor) {
  for (;;) {
    boost::system::error_code ec;
    auto peer = co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    ++connections_;
    peer.close(ec);
  }
}

void note_loopback_exposure(containment_grade& grade, network_access network, std::uint64_t connections) {
  // An allowlist denies every direct connection too: only the proxy's listener is meant to be reached.
  if (connections == 0 || network == network_access::unrestricted) return;
  grade.grades.network = enforcement::unavailable;
  grade.network_denied = false;
  // Noted when the containment is graded and again at the end: one line, with the final count.
  constexpr std::string_view suffix = " connection(s) reached the host's loopback listener";
  auto line = fmt::format("network: {}{}", connections, suffix);
  const auto earlier = std::ranges::find_if(grade.problems, [&](const std::string& problem) {
    return problem.starts_with("network: ") && problem.ends_with(suffix);
  });
  if (earlier != grade.problems.end()) *earlier = std::move(line);
  else grade.problems.push_back(std::move(line));
}

}  // namespace psych::host
