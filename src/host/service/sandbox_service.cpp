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
#include <fmt/format.h>

#include "http/bearer_tokens.hpp"
#include "http/http_server.hpp"
#include "service/service_state.hpp"

namespace psych {

using namespace psych::host;

awaitable<void> sandbox_service::impl::accept_loop() {
  // Accepted while draining too: the executions still running need their results and cancels,
  // which come on connections of their own (execute() refuses new executions).
  co_await accept_connections(
      acceptor, [this] { return connections.size() < options.max_connections; },
      [this](asio::ip::tcp::socket socket) { asio::co_spawn(io, serve(std::move(socket)), asio::detached); });
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
  co_await serve_connection(
      std::move(socket), tls.get(), options.request_timeout_seconds,
      [this](beast::tcp_stream* connection, bool open) { open ? opened(connection) : closed(connection); },
      [&](auto& stream) { return serve_requests(*this, stream, peer, via_proxy); });
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
  PSYCH_TRY(auto tls, server_tls(options.tls_cert_file, options.tls_key_file, options.listen_host,
                                 options.allow_insecure_http));
  auto state = std::make_unique<impl>(std::move(backend), std::move(options));
  state->credentials.replace(std::move(tokens).value());
  state->tls = std::move(tls);
  state->counters.count([](auto& c) {
    c.start_time_seconds =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  });
  auto& o = state->options;
  boost::system::error_code ec;
  for (const auto& proxy : o.trusted_proxies) {
    const auto parsed = asio::ip::make_address(proxy, ec);
    if (ec) return fail_with(error_kind::sandbox_setup, fmt::format("the trusted proxy {}: not an IP address", proxy));
    state->proxies.push_back(parsed);
  }
  PSYCH_TRY(listen_on(state->acceptor, o.listen_host, o.port));

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
  return impl_->credentials.reload(impl_->options.token_file);
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
