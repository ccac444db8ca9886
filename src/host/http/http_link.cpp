#include "http/http_link.hpp"

#include <openssl/ssl.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <fmt/format.h>

namespace psych::host {

std::unique_ptr<asio::ssl::context> tls_context(asio::ssl::context::method method) {
  auto context = std::make_unique<asio::ssl::context>(method);
  context->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
  return context;
}

result<service_endpoint> parse_service_url(std::string_view url) {
  const auto bad = [&](std::string_view why) {
    return fail_with(error_kind::sandbox_setup, fmt::format("the service URL {}: {}", peer_excerpt(url, 100), why));
  };
  service_endpoint out;
  if (url.starts_with("https://")) {
    url.remove_prefix(8);
  } else if (url.starts_with("http://")) {
    out.tls = false;
    url.remove_prefix(7);
  } else {
    return bad("must start with https:// (or http://)");
  }
  if (url.ends_with('/')) url.remove_suffix(1);
  if (url.find_first_of("/?#@ ") != std::string_view::npos)
    return bad("must be a scheme, a host and a port, with no path, query or credentials");
  std::string_view host = url, port;
  if (url.starts_with('[')) {
    const auto close = url.find(']');
    if (close == std::string_view::npos) return bad("an IPv6 address needs its closing ']'");
    host = url.substr(1, close - 1);
    const auto rest = url.substr(close + 1);
    if (!rest.empty()) {
      if (!rest.starts_with(':')) return bad("expected ':' and a port after the address");
      port = rest.substr(1);
    }
  } else if (const auto colon = url.rfind(':'); colon != std::string_view::npos) {
    host = url.substr(0, colon);
    port = url.substr(colon + 1);
  }
  if (host.empty()) return bad("no host");
  if (port.empty()) port = out.tls ? "443" : "80";
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos) return bad("a bad port");
  out.host = std::string(host);
  out.port = std::string(port);
  out.authority = url.starts_with('[') ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
  return out;
}

bool is_loopback_host(std::string_view host) {
  if (host == "localhost") return true;
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(std::string(host), ec);
  return !ec && address.is_loopback();
}

std::string peer_excerpt(std::string_view text, std::size_t limit) {
  std::string out;
  for (const char c : text.substr(0, limit)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  if (text.size() > limit) out.append("...");
  return out;
}

awaitable<result<std::unique_ptr<http_link>>> http_link::open(const service_endpoint& where, asio::ssl::context* tls,
                                                              std::chrono::steady_clock::duration timeout,
                                                              SSL_SESSION* session) {
  const auto executor = co_await asio::this_coro::executor;
  asio::ip::tcp::resolver resolver(executor);
  auto [resolve_ec, addresses] = co_await resolver.async_resolve(where.host, where.port, use_tuple);
  if (resolve_ec)
    co_return fail_with(error_kind::provider_error, fmt::format("resolving {}: {}", where.authority, resolve_ec.message()));
  beast::tcp_stream tcp(executor);
  tcp.expires_after(timeout);
  auto [connect_ec, endpoint] = co_await tcp.async_connect(addresses, use_tuple);
  if (connect_ec)
    co_return fail_with(error_kind::provider_error,
                      fmt::format("connecting to {}: {}", where.authority, connect_ec.message()));
  tcp.socket().set_option(asio::ip::tcp::no_delay(true));
  if (!where.tls || !tls) co_return std::make_unique<http_link>(std::move(tcp));

  auto stream = std::make_unique<tls_stream>(std::move(tcp), *tls);
  SSL* ssl = stream->native_handle();
  boost::system::error_code ec;
  boost::system::error_code name_ec;
  asio::ip::make_address(where.host, name_ec);
  if (name_ec && !SSL_set_tlsext_host_name(ssl, where.host.c_str()))  // SNI is for names only
    co_return fail_with(error_kind::provider_error, "TLS: the server name could not be set");
  stream->set_verify_mode(asio::ssl::verify_peer, ec);
  stream->set_verify_callback(asio::ssl::host_name_verification(where.host), ec);
  if (ec) co_return fail_with(error_kind::provider_error, "TLS: " + ec.message());
  if (session) SSL_set_session(ssl, session);
  beast::get_lowest_layer(*stream).expires_after(timeout);
  auto [handshake_ec] = co_await stream->async_handshake(asio::ssl::stream_base::client, use_tuple);
  if (handshake_ec) {
    std::string why = handshake_ec.message();
    if (const long verify = SSL_get_verify_result(ssl); verify != X509_V_OK)
      why = X509_verify_cert_error_string(verify);
    co_return fail_with(error_kind::provider_error, fmt::format("TLS with {}: {}", where.authority, why));
  }
  co_return std::make_unique<http_link>(std::move(stream));
}

SSL_SESSION* http_link::session() const {
  if (const auto* tls = std::get_if<std::unique_ptr<tls_stream>>(&stream_))
    return SSL_get1_session(const_cast<tls_stream&>(**tls).native_handle());
  return nullptr;
}

void http_link::close() {
  boost::system::error_code ignored;
  tcp().socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  tcp().close();
}

}  // namespace psych::host
