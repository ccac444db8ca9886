#include "execution/loopback_attach.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include "psych/protocol/json.hpp"
#include "os/same_secret.hpp"
#include "os/random_hex.hpp"

namespace psych::host {

namespace asio = boost::asio;
using asio::ip::tcp;

attach_listener::attach_listener(asio::io_context& io) : io_(io), acceptor_(io) {}

result<void> attach_listener::open() {
  boost::system::error_code ec;
  const tcp::endpoint loopback(asio::ip::address_v4::loopback(), 0);
  acceptor_.open(loopback.protocol(), ec);
  if (!ec) acceptor_.bind(loopback, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) port_ = acceptor_.local_endpoint(ec).port();
  if (ec) return fail_with(error_kind::system_call_failed, "the launcher's loopback listener: " + ec.message());
  secret_ = random_hex(16);
  return success();
}

void attach_listener::close() noexcept {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
}

asio::awaitable<result<attach_listener::attached_socket>> attach_listener::accept(protocol::attached_stream stream) {
  for (;;) {
    attach_listener::attached_socket connection(io_);
    boost::system::error_code ec;
    co_await acceptor_.async_accept(connection, asio::redirect_error(asio::use_awaitable, ec));
    if (ec)
      co_return fail_with(error_kind::launcher_unavailable,
                        fmt::format("no {} connection proved the launch's secret ({} dropped): {}", name_of(stream),
                                    dropped_, ec.message()));
    if (co_await proves(connection, stream)) {
      // Frames are written whole and answered: Nagle would only hold each one back.
      connection.set_option(tcp::no_delay(true), ec);
      co_return std::move(connection);
    }
    ++dropped_;
  }
}

asio::awaitable<bool> attach_listener::proves(attach_listener::attached_socket& connection, protocol::attached_stream stream) {
  asio::steady_timer deadline(io_, proof_patience);
  // Destroyed or cancelled, the timer calls this with an error, and it touches nothing.
  deadline.async_wait([&connection](boost::system::error_code ec) {
    if (!ec) connection.close(ec);
  });
  std::string line;
  for (char byte = 0;;) {
    boost::system::error_code ec;
    co_await connection.async_read_some(asio::buffer(&byte, 1), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return false;  // its deadline passed, or it went away
    if (byte == '\n') break;
    if (line.size() == max_proof_bytes) co_return false;
    line.push_back(byte);
  }
  deadline.cancel();
  auto frame = protocol::decode_frame<protocol::attach_frame>(line);
  if (!frame) co_return false;
  const auto& attach = std::get<protocol::attach_frame>(frame.value());
  co_return attach.stream == stream && same_secret(attach.secret, secret_);
}

}  // namespace psych::host
