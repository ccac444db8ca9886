// psych mcp over Streamable HTTP (mcp_http_server.hpp): its start, its listener and connections,
// the idle sweep and its shutdown. What one request asks is mcp_http_requests.cpp's to answer.
#include "mcp_server/mcp_http.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "http/http_server.hpp"

namespace psych {

using namespace psych::host;

awaitable<void> mcp_http_server::impl::accept_loop() {
  co_await accept_connections(
      acceptor, [this] { return !stopping && connections.size() < options.max_connections; },
      [this](asio::ip::tcp::socket socket) { asio::co_spawn(io, serve(std::move(socket)), asio::detached); });
}

awaitable<void> mcp_http_server::impl::serve(asio::ip::tcp::socket socket) {
  const auto track = [this](beast::tcp_stream* connection, bool open) {
    if (open) connections.insert(connection);
    else connections.erase(connection);
    count([&](auto& c) { c.connections = connections.size(); });
  };
  co_await serve_connection(std::move(socket), tls.get(), options.request_timeout_seconds, track,
                            [this](auto& stream) { return serve_requests(stream); });
}

awaitable<void> mcp_http_server::impl::expire_idle() {
  const auto expiry = std::chrono::duration_cast<mcp_clock::duration>(millis(options.session_expiry_seconds));
  const auto every = std::clamp<mcp_clock::duration>(expiry / 4, std::chrono::milliseconds(50), std::chrono::seconds(60));
  for (;;) {
    sweep.expires_after(every);
    co_await sweep.async_wait(use_tuple);  // cancelled only when stopping, checked below
    if (stopping) co_return;
    if (const auto expired = sessions.forget_idle(expiry)) {
      count([&](auto& c) { c.sessions_expired += expired; });
      note_sessions();
    }
  }
}

void mcp_http_server::impl::note_sessions() {
  count([&](auto& c) { c.sessions = sessions.size(); });
}

void mcp_http_server::impl::close_all() {
  stopping = true;
  boost::system::error_code ignored;
  acceptor.close(ignored);
  sweep.cancel();
  sessions.forget_all();
  note_sessions();
  for (auto* connection : connections) connection->close();
}

mcp_http_server::mcp_http_server(std::unique_ptr<impl> state) : impl_(std::move(state)) {}

result<std::unique_ptr<mcp_http_server>> mcp_http_server::start(const mcp_server_options& sessions,
                                                                mcp_http_options options) {
  if (!sessions.backend) return fail_with(error_kind::sandbox_setup, "psych mcp needs a sandbox backend");
  const auto at_least_one = [](std::string_view name, std::size_t value) -> result<void> {
    if (value == 0) return fail_with(error_kind::invalid_argument, fmt::format("{} must be at least 1", name));
    return success();
  };
  PSYCH_TRY(at_least_one("max_sessions", options.max_sessions));
  PSYCH_TRY(at_least_one("max_connections", options.max_connections));
  PSYCH_TRY(at_least_one("max_requests_in_flight", options.max_requests_in_flight));
  if (!(options.session_expiry_seconds > 0))
    return fail_with(error_kind::invalid_argument, "session_expiry_seconds must be positive");
  PSYCH_TRY(auto tokens, token_table::load(options.token_file));
  PSYCH_TRY(auto tls, server_tls(options.tls_cert_file, options.tls_key_file, options.listen_host,
                                 options.allow_insecure_http));
  auto state = std::make_unique<impl>(sessions, std::move(options));
  state->credentials.replace(std::move(tokens));
  state->tls = std::move(tls);
  PSYCH_TRY(listen_on(state->acceptor, state->options.listen_host, state->options.port));
  boost::system::error_code ec;
  const auto bound = state->acceptor.local_endpoint(ec);
  state->bound_port = ec ? state->options.port : bound.port();

  auto* raw = state.get();
  asio::co_spawn(raw->io, raw->accept_loop(), asio::detached);
  asio::co_spawn(raw->io, raw->expire_idle(), asio::detached);
  raw->io_thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<mcp_http_server>(new mcp_http_server(std::move(state)));
}

mcp_http_server::~mcp_http_server() { shutdown(); }

std::uint16_t mcp_http_server::port() const { return impl_->bound_port; }

result<void> mcp_http_server::reload_tokens() { return impl_->credentials.reload(impl_->options.token_file); }

void mcp_http_server::shutdown() {
  std::call_once(impl_->shutdown_once, [state = impl_.get()] {
    asio::post(state->io, [state] { state->close_all(); });
    if (state->io_thread.joinable()) state->io_thread.join();
    // Every session is the reaper's now: this returns once their executions have ended.
    state->reaper.finish();
    // What the executions' last messages posted to the loop holds (their replies) goes here, while
    // the loop still exists.
    state->io.restart();
    state->io.poll();
  });
}

mcp_http_stats mcp_http_server::stats() const {
  std::lock_guard lock(impl_->counted_mutex);
  return impl_->counted;
}

}  // namespace psych
