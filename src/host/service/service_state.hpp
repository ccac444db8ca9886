#pragma once
// The sandbox service (sandbox_service.hpp) as its files share it: its parts, each the concept of a
// file of its own (credentials and routes, the backend's description, admission, the executions'
// streams, the counts), and the connections of its one event loop thread, which serves every
// connection and alone writes to them.
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "http/bearer_tokens.hpp"
#include "http/http_link.hpp"
#include "psych/host/sandbox_service.hpp"
#include "service/admission.hpp"
#include "service/execution_stream.hpp"
#include "service/service_description.hpp"
#include "service/service_metrics.hpp"
#include "service/service_routes.hpp"

namespace psych {

struct sandbox_service::impl {
  impl(std::unique_ptr<sandbox> backend_in, sandbox_service_options options_in)
      : options(std::move(options_in)), backend(std::move(backend_in)), acceptor(io) {}

  sandbox_service_options options;
  std::unique_ptr<sandbox> backend;
  host::asio::io_context io;
  std::unique_ptr<host::asio::ssl::context> tls;
  std::vector<host::asio::ip::address> proxies;  ///< options.trusted_proxies, parsed
  host::asio::ip::tcp::acceptor acceptor;
  std::thread io_thread;

  host::bearer_credentials credentials;
  service_counters counters;
  host::service_description description{io, *backend};
  host::admission admitted{io, options, counters, [this] { close_all(); }};
  host::execution_streams executions{io, *backend, options, counters, admitted, description};

  // The event loop's alone.
  std::set<host::beast::tcp_stream*> connections;
  std::promise<void> drained;
  std::once_flag shutdown_once;

  host::asio::awaitable<void> accept_loop();
  host::asio::awaitable<void> serve(host::asio::ip::tcp::socket socket);
  void opened(host::beast::tcp_stream* connection);
  void closed(host::beast::tcp_stream* connection);
  /// Drained: the listener and every connection close, and shutdown() returns.
  void close_all();
};

}  // namespace psych
