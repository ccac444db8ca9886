#pragma once
// What psych's two HTTP servers (psych serve, psych mcp --listen) share of being a server: the TLS
// context from a certificate and key, and the refusal of plaintext off loopback; the listening
// socket; the accept loop with its bound on connections; one whole response written in time.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "http/http_link.hpp"
#include "psych/result.hpp"

namespace psych::host {

/// A server's TLS context from its PEM certificate chain and key; null for plaintext (neither
/// given). Refuses one without the other, and plaintext on an address that is not loopback unless
/// `allow_insecure_http`: credentials would cross the network in the clear. Errors name the file.
result<std::unique_ptr<asio::ssl::context>> server_tls(const std::optional<std::string>& cert_file,
                                                       const std::optional<std::string>& key_file,
                                                       std::string_view listen_host, bool allow_insecure_http);

/// Opens, binds and listens on host:port (0: any free port). An error names the address.
result<void> listen_on(asio::ip::tcp::acceptor& acceptor, const std::string& host, std::uint16_t port);

/// Accepts until the acceptor is closed, handing each connection to `serve`. One accepted while
/// `has_room()` is false is closed at once; an accept that fails (out of descriptors, most likely)
/// waits 50 ms rather than spin.
awaitable<void> accept_connections(asio::ip::tcp::acceptor& acceptor, std::function<bool()> has_room,
                                   std::function<void(asio::ip::tcp::socket)> serve);

/// Serves one accepted connection: plain, or TLS once its handshake is done within
/// `handshake_timeout_seconds`; `serve(stream)` (an awaitable) is called with beast::tcp_stream& or
/// tls_stream&. `track(lowest layer, true)` is called as it opens and `(…, false)` as it closes, so
/// that a shutdown can close what is open.
template <class Serve>
awaitable<void> serve_connection(asio::ip::tcp::socket socket, asio::ssl::context* tls, double handshake_timeout_seconds,
                                 std::function<void(beast::tcp_stream*, bool)> track, Serve serve) {
  beast::tcp_stream tcp(std::move(socket));
  if (!tls) {
    track(&tcp, true);
    co_await serve(tcp);
    track(&tcp, false);
    tcp.close();
    co_return;
  }
  tls_stream stream(std::move(tcp), *tls);
  auto& lowest_layer = beast::get_lowest_layer(stream);
  track(&lowest_layer, true);
  lowest_layer.expires_after(millis(handshake_timeout_seconds));
  auto [handshake_ec] = co_await stream.async_handshake(asio::ssl::stream_base::server, use_tuple);
  if (!handshake_ec) co_await serve(stream);
  track(&lowest_layer, false);
  lowest_layer.close();
}

/// Reads the next request's header into `header` within `timeout_seconds`, at most max_header_bytes
/// of it. No body limit is set: the caller's body parser applies its route's (Beast checks a
/// Content-Length only as it parses the header, against its default of 1 MiB, and never again after
/// the body's parser takes over). Stream: beast::tcp_stream or tls_stream.
template <class Stream>
awaitable<boost::system::error_code> read_request_header(Stream& stream, beast::flat_buffer& buffer,
                                                         http::request_parser<http::empty_body>& header,
                                                         double timeout_seconds);

/// Closes a connection whose request is left partly unread without losing the response just written
/// to it: a close with unread bytes resets the connection, and a client still sending would lose the
/// response. Ends the sending side, reads and drops (without holding) what still comes for at most
/// `linger_seconds`, then closes.
awaitable<void> close_unread(beast::tcp_stream& tcp, double linger_seconds);

/// Writes `response` whole (its payload prepared here) within the timeout; false when it could not
/// be. Stream: beast::tcp_stream or tls_stream.
template <class Stream>
awaitable<bool> write_whole(Stream& stream, http::response<http::string_body>& response, double timeout_seconds);

}  // namespace psych::host
