#include "http/http_server.hpp"

#include <array>
#include <chrono>

#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <fmt/format.h>

namespace psych::host {

result<std::unique_ptr<asio::ssl::context>> server_tls(const std::optional<std::string>& cert_file,
                                                       const std::optional<std::string>& key_file,
                                                       std::string_view listen_host, bool allow_insecure_http) {
  if (!cert_file && !key_file) {
    if (!is_loopback_host(listen_host) && !allow_insecure_http)
      return fail_with(error_kind::sandbox_setup,
                       fmt::format("plaintext HTTP on {}, which is not loopback, would carry credentials in the "
                                   "clear; give a certificate and key, or allow_insecure_http",
                                   listen_host));
    return std::unique_ptr<asio::ssl::context>{};
  }
  if (!cert_file || !key_file) return fail_with(error_kind::sandbox_setup, "TLS needs both a certificate and a key");
  auto context = tls_context(asio::ssl::context::tls_server);
  boost::system::error_code ec;
  context->use_certificate_chain_file(*cert_file, ec);
  if (ec) return fail_with(error_kind::sandbox_setup, fmt::format("the certificate {}: {}", *cert_file, ec.message()));
  context->use_private_key_file(*key_file, asio::ssl::context::pem, ec);
  if (ec) return fail_with(error_kind::sandbox_setup, fmt::format("the key {}: {}", *key_file, ec.message()));
  return context;
}

result<void> listen_on(asio::ip::tcp::acceptor& acceptor, const std::string& host, std::uint16_t port) {
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) return fail_with(error_kind::sandbox_setup, fmt::format("the listen address {}: {}", host, ec.message()));
  const asio::ip::tcp::endpoint endpoint(address, port);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return fail_with(error_kind::sandbox_setup, fmt::format("listening on {}:{}: {}", host, port, ec.message()));
  return success();
}

awaitable<void> accept_connections(asio::ip::tcp::acceptor& acceptor, std::function<bool()> has_room,
                                   std::function<void(asio::ip::tcp::socket)> serve) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) {
      asio::steady_timer pause(acceptor.get_executor(), std::chrono::milliseconds(50));
      co_await pause.async_wait(use_tuple);
      continue;
    }
    if (!has_room()) {
      boost::system::error_code ignored;
      socket.close(ignored);
      continue;
    }
    serve(std::move(socket));
  }
}

template <class Stream>
awaitable<boost::system::error_code> read_request_header(Stream& stream, beast::flat_buffer& buffer,
                                                         http::request_parser<http::empty_body>& header,
                                                         double timeout_seconds) {
  header.header_limit(max_header_bytes);
  header.body_limit(boost::none);
  beast::get_lowest_layer(stream).expires_after(millis(timeout_seconds));
  auto [ec, n] = co_await http::async_read_header(stream, buffer, header, use_tuple);
  co_return ec;
}

awaitable<void> close_unread(beast::tcp_stream& tcp, double linger_seconds) {
  boost::system::error_code ignored;
  tcp.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  std::array<char, 16 * 1024> dropped;
  tcp.expires_after(millis(linger_seconds));
  for (;;) {
    auto [ec, n] = co_await tcp.async_read_some(asio::buffer(dropped), use_tuple);
    if (ec) break;  // the client's end, or the linger's
  }
  tcp.close();
}

template <class Stream>
awaitable<bool> write_whole(Stream& stream, http::response<http::string_body>& response, double timeout_seconds) {
  response.prepare_payload();
  beast::get_lowest_layer(stream).expires_after(millis(timeout_seconds));
  auto [ec, n] = co_await http::async_write(stream, response, use_tuple);
  co_return !ec;
}

template awaitable<boost::system::error_code> read_request_header(beast::tcp_stream&, beast::flat_buffer&,
                                                                  http::request_parser<http::empty_body>&, double);
template awaitable<boost::system::error_code> read_request_header(tls_stream&, beast::flat_buffer&,
                                                                  http::request_parser<http::empty_body>&, double);
template awaitable<bool> write_whole(beast::tcp_stream&, http::response<http::string_body>&, double);
template awaitable<bool> write_whole(tls_stream&, http::response<http::string_body>&, double);

}  // namespace psych::host
