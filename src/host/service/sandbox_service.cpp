// The reference sandbox service (sandbox_service.hpp; the protocol in docs/remote-protocol.md): its
// start, its listener and each connection's TLS, and its shutdown. What a connection's requests ask
// is service_routes' to answer.
#include "psych/host/sandbox_service.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>

#include "service/service_state.hpp"
#include "service/service_tokens.hpp"

namespace psych {

using namespace psych::host;

awaitable<void> sandbox_service::impl::accept_loop() {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) {
      // Out of descriptors, most likely: wait a little rather than spin, and go on.
      asio::steady_timer pause(io, std::chrono::milliseconds(50));
      co_await pause.async_wait(use_tuple);
      continue;
    }
    // Accepted while draining too: the executions still running need their results and
    // cancels, which come on connections of their own (execute() refuses new executions).
    if (connections.size() >= options.max_connections) {
      boost::system::error_code ignored;
      socket.close(ignored);
      continue;
    }
    asio::co_spawn(io, serve(std::move(socket)), asio::detached);
  }
}

void sandbox_service::impl::opened(beast::tcp_stream* connection) {
  connections.insert(connection);
  counters.count([&](auto& c) { c.connections = connections.size(); });
}

void sandbox_service::impl::closed(beast::tcp_stream* connection) {
  connections.erase(connection);
  counters.count([&](auto& c) { c.connections = connections.size(); });
}

awaitable<void> sandbox_service::impl::serve(asio::ip::tcp::socket socket) {
  boost::system::error_code ec;
  const auto remote = socket.remote_endpoint(ec);
  const std::string peer = ec ? "?" : fmt::format("{}:{}", remote.address().to_string(), remote.port());
  const bool via_proxy = !ec && std::ranges::find(proxies, remote.address()) != proxies.end();
  beast::tcp_stream tcp(std::move(socket));
  if (!tls) {
    opened(&tcp);
    co_await serve_requests(*this, tcp, peer, via_proxy);
    closed(&tcp);
    tcp.close();
    co_return;
  }
  tls_stream stream(std::move(tcp), *tls);
  auto& lowest_layer = beast::get_lowest_layer(stream);
  opened(&lowest_layer);
  lowest_layer.expires_after(millis(options.request_timeout_seconds));
  auto [handshake_ec] = co_await stream.async_handshake(asio::ssl::stream_base::server, use_tuple);
  if (!handshake_ec) co_await serve_requests(*this, stream, peer, via_proxy);
  closed(&lowest_layer);
  lowest_layer.close();
}

void sandbox_service::impl::close_all() {
  boost::system::error_code ignored;
  acceptor.close(ignored);
  for (auto* connection : connections) connection->close();
  drained.set_value();
}

sandbox_service::sandbox_service(std::unique_ptr<impl> state) : impl_(std::move(state)) {}

result<std::unique_ptr<sandbox_service>> sandbox_service::start(std::unique_ptr<sandbox> backend,
                                                                sandbox_service_options options) {
  if (!backend) return fail_with(error_kind::sandbox_setup, "the service needs a backend");
  if (options.max_concurrent == 0) return fail_with(error_kind::invalid_argument, "max_concurrent must be at least 1");
  auto tokens = token_table::load(options.token_file);
  if (!tokens) return tokens.error();
  const bool tls = options.tls_cert_file || options.tls_key_file;
  if (tls && !(options.tls_cert_file && options.tls_key_file))
    return fail_with(error_kind::sandbox_setup, "TLS needs both a certificate and a key");
  if (!tls && !is_loopback_host(options.listen_host) && !options.allow_insecure_http)
    return fail_with(error_kind::sandbox_setup,
                     fmt::format("plaintext HTTP on {}, which is not loopback, would carry credentials in the clear; "
                                 "give a certificate and key, or allow_insecure_http",
                                 options.listen_host));
  auto state = std::make_unique<impl>(std::move(backend), std::move(options));
  state->credentials.replace(std::move(tokens).value());
  state->counters.count([](auto& c) {
    c.start_time_seconds =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  });
  auto& o = state->options;
  if (tls) {
    state->tls = tls_context(asio::ssl::context::tls_server);
    auto& context = *state->tls;
    boost::system::error_code ec;
    context.use_certificate_chain_file(*o.tls_cert_file, ec);
    if (ec) return fail_with(error_kind::sandbox_setup, fmt::format("the certificate {}: {}", *o.tls_cert_file, ec.message()));
    context.use_private_key_file(*o.tls_key_file, asio::ssl::context::pem, ec);
    if (ec) return fail_with(error_kind::sandbox_setup, fmt::format("the key {}: {}", *o.tls_key_file, ec.message()));
  }
  boost::system::error_code ec;
  for (const auto& proxy : o.trusted_proxies) {
    const auto parsed = asio::ip::make_address(proxy, ec);
    if (ec) return fail_with(error_kind::sandbox_setup, fmt::format("the trusted proxy {}: not an IP address", proxy));
    state->proxies.push_back(parsed);
  }
  const auto address = asio::ip::make_address(o.listen_host, ec);
  if (ec) return fail_with(error_kind::sandbox_setup, fmt::format("the listen address {}: {}", o.listen_host, ec.message()));
  const asio::ip::tcp::endpoint endpoint(address, o.port);
  auto& acceptor = state->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return fail_with(error_kind::sandbox_setup,
                     fmt::format("listening on {}:{}: {}", o.listen_host, o.port, ec.message()));

  state->description.refresh();
  auto* raw = state.get();
  asio::co_spawn(raw->io, raw->accept_loop(), asio::detached);
  raw->io_thread = std::thread([raw] { raw->io.run(); });
  raw->description.start_refreshing(o.describe_refresh_seconds);
  return std::unique_ptr<sandbox_service>(new sandbox_service(std::move(state)));
}

sandbox_service::~sandbox_service() { shutdown(); }

std::uint16_t sandbox_service::port() const {
  boost::system::error_code ec;
  const auto endpoint = impl_->acceptor.local_endpoint(ec);
  return ec ? impl_->options.port : endpoint.port();
}

result<void> sandbox_service::reload_tokens() {
  auto tokens = token_table::load(impl_->options.token_file);
  if (!tokens) return tokens.error();
  impl_->credentials.replace(std::move(tokens).value());
  return success();
}

void sandbox_service::shutdown() {
  std::call_once(impl_->shutdown_once, [this] {
    auto drained = impl_->drained.get_future();
    asio::post(impl_->io, [state = impl_.get()] { state->admitted.begin_shutdown(); });
    drained.wait();
    impl_->description.stop_refreshing();
    impl_->io_thread.join();
    impl_->description.join_probe();
  });
}

sandbox_service_stats sandbox_service::stats() const { return impl_->counters.counted(); }

}  // namespace psych
