// The bytes of an allowed connection, both ways: in pieces of 64 KiB, each read only once the last
// is written (so a connection never holds more than one piece a direction), counted against the
// connection's byte bound and the proxy's meters, every piece a sign of life to the idle bound.
#include <algorithm>
#include <memory>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "egress/proxy_connection.hpp"

namespace psych::host::egress {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr std::size_t relay_piece = 64 * 1024;

}  // namespace

asio::awaitable<proxy_connection::relay_end> proxy_connection::send(tcp::socket& to, std::string_view bytes) {
  if (bytes.size() > bytes_left_) {
    end_both();
    co_return relay_end::bound;
  }
  // Taken from the bound before the write, so the other direction, deciding while this one
  // writes, sees what is really left.
  bytes_left_ -= bytes.size();
  const bool to_program = &to == &client_;
  writing_to_program_ = to_program;
  auto [ec, n] =
      co_await asio::async_write(to, asio::buffer(bytes.data(), bytes.size()), asio::as_tuple(asio::use_awaitable));
  writing_to_program_ = false;
  clock_.touch();
  if (to_program)
    context_.tally.received(n);
  else
    context_.tally.sent(n);
  if (ending_ || clock_.expired() != expiry::none) co_return relay_end::stopped;
  if (ec) {
    end_both();
    co_return relay_end::failed;
  }
  co_return relay_end::finished;
}

asio::awaitable<proxy_connection::relay_end> proxy_connection::relay(tcp::socket& from, tcp::socket& to) {
  const auto piece = std::make_unique_for_overwrite<char[]>(relay_piece);
  for (;;) {
    auto [ec, n] =
        co_await from.async_read_some(asio::buffer(piece.get(), relay_piece), asio::as_tuple(asio::use_awaitable));
    if (ending_ || clock_.expired() != expiry::none) co_return relay_end::stopped;
    if (ec == asio::error::eof) {
      // Half a close: the other side may still answer what it was sent.
      boost::system::error_code ignored;
      to.shutdown(tcp::socket::shutdown_send, ignored);
      co_return relay_end::finished;
    }
    if (ec) {
      end_both();
      co_return relay_end::failed;
    }
    clock_.touch();
    const std::size_t passing = static_cast<std::size_t>(std::min<std::uint64_t>(n, bytes_left_));
    if (passing > 0) {
      const auto sent = co_await send(to, std::string_view(piece.get(), passing));
      if (sent != relay_end::finished) co_return sent;
    }
    if (passing < n) {
      end_both();
      co_return relay_end::bound;
    }
  }
}

void proxy_connection::count_cut(relay_end one, relay_end other) {
  if (one == relay_end::bound || other == relay_end::bound)
    context_.tally.cut(cut_reason::bytes);
  else if (clock_.expired() == expiry::idle)
    context_.tally.cut(cut_reason::idle);
  else if (clock_.expired() == expiry::lifetime)
    context_.tally.cut(cut_reason::lifetime);
}

}  // namespace psych::host::egress
