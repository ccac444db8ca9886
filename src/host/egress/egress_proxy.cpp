#include "egress/egress_proxy.hpp"

#include <fcntl.h>
#include <sys/socket.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include "egress/proxy_connection.hpp"
#include "os/posix.hpp"

namespace psych::host {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

/// The address a descriptor listens on, once it is a listening TCP socket of IPv4 or IPv6.
result<tcp::endpoint> listening_endpoint(int fd) {
  int type = 0;
  int listening = 0;
  socklen_t size = sizeof type;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &size) != 0)
    return call_failed("getsockopt", fmt::format("{}, SO_TYPE", fd));
  size = sizeof listening;
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) != 0)
    return call_failed("getsockopt", fmt::format("{}, SO_ACCEPTCONN", fd));
  tcp::endpoint endpoint;
  socklen_t length = static_cast<socklen_t>(endpoint.capacity());
  if (::getsockname(fd, endpoint.data(), &length) != 0) return call_failed("getsockname", std::to_string(fd));
  const int family = endpoint.data()->sa_family;
  if (type != SOCK_STREAM || !listening || (family != AF_INET && family != AF_INET6))
    return fail_with(error_kind::invalid_argument,
                     fmt::format("descriptor {} is not a listening TCP socket of IPv4 or IPv6", fd));
  endpoint.resize(length);
  return endpoint;
}

/// Accepts until the listener closes: each connection served while the proxy has room, answered
/// 503 while it has not (and, past as many again, closed at once).
asio::awaitable<void> accept_loop(tcp::acceptor& listener, egress::proxy_context& context) {
  using egress::proxy_connection;
  for (;;) {
    auto [ec, socket] = co_await listener.async_accept(asio::as_tuple(asio::use_awaitable));
    if (!listener.is_open()) co_return;
    if (ec) {
      // Out of descriptors, most likely: a moment's pause rather than a loop of failing accepts.
      asio::steady_timer pause(listener.get_executor(), std::chrono::milliseconds(50));
      co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    const auto& options = context.options;
    if (context.serving < options.max_connections) {
      auto connection = std::make_shared<proxy_connection>(context, std::move(socket), egress::admission::served);
      asio::co_spawn(listener.get_executor(), proxy_connection::serve(std::move(connection)), asio::detached);
    } else if (context.turning_away < options.max_connections) {
      auto connection = std::make_shared<proxy_connection>(context, std::move(socket), egress::admission::turned_away);
      asio::co_spawn(listener.get_executor(), proxy_connection::turn_away(std::move(connection)), asio::detached);
    } else {
      context.tally.refused(
          {{}, 0, proxy_error::connection_limit_reached, "closed unanswered: too many waiting for a 503"});
      socket.close(ignored);
    }
  }
}

}  // namespace

struct egress_proxy::state {
  explicit state(egress_proxy_options options) : context{std::move(options), {}, {}, 0, 0, {}, {}} {}

  egress::proxy_context context;  // first: the event loop's connections refer to it until the loop is gone
  std::unique_ptr<asio::io_context> io = std::make_unique<asio::io_context>(1);
  std::vector<std::unique_ptr<tcp::acceptor>> listeners;
  std::thread thread;
  std::mutex stopping;
  /// The event loop ran out of work: every connection ended.
  std::mutex ended_mutex;
  std::condition_variable ended_signal;
  bool ended = false;
};

egress_proxy::egress_proxy() = default;

egress_proxy::~egress_proxy() { stop(); }

result<std::unique_ptr<egress_proxy>> egress_proxy::start(egress_proxy_options options, std::vector<int> listeners) {
  std::vector<unique_fd> owned;
  for (const int fd : listeners) owned.emplace_back(fd);
  if (owned.empty()) return fail_with(error_kind::invalid_argument, "an egress proxy without a listener");
  if (!options.resolve) options.resolve = egress::system_resolver();
  std::unique_ptr<egress_proxy> proxy(new egress_proxy());
  proxy->state_ = std::make_unique<state>(std::move(options));
  auto& s = *proxy->state_;
  for (auto& fd : owned) {
    PSYCH_TRY(const auto endpoint, listening_endpoint(fd.get()));
    // The descriptor may come from a launcher that left it inheritable: no child of the host's gets it.
    if (::fcntl(fd.get(), F_SETFD, FD_CLOEXEC) != 0)
      return call_failed("fcntl", fmt::format("{}, FD_CLOEXEC", fd.get()));
    auto listener = std::make_unique<tcp::acceptor>(*s.io);
    boost::system::error_code ec;
    listener->assign(endpoint.protocol(), fd.get(), ec);
    if (ec)
      return fail_with(error_kind::system_call_failed, fmt::format("listening on {}: {}", fd.get(), ec.message()));
    (void)fd.release();
    s.context.own_listeners.push_back(endpoint);
    s.listeners.push_back(std::move(listener));
  }
  for (auto& listener : s.listeners) asio::co_spawn(*s.io, accept_loop(*listener, s.context), asio::detached);
  try {
    s.thread = std::thread([&s] {
      for (;;) {
        try {
          s.io->run();
          break;
        } catch (...) {
          // A handler that threw took only its own connection with it: the loop goes on.
        }
      }
      std::lock_guard lock(s.ended_mutex);
      s.ended = true;
      s.ended_signal.notify_all();
    });
  } catch (const std::system_error& e) {
    return fail_with(error_kind::sandbox_setup, fmt::format("starting the egress proxy's thread: {}", e.what()));
  }
  return proxy;
}

egress_meters egress_proxy::meters() const { return state_->context.tally.snapshot(); }

void egress_proxy::stop() {
  if (!state_) return;
  auto& s = *state_;
  std::lock_guard lock(s.stopping);
  if (!s.io) return;
  if (s.thread.joinable()) {
    asio::post(*s.io, [&s] {
      boost::system::error_code ignored;
      for (auto& listener : s.listeners) listener->close(ignored);
      for (auto* connection : s.context.live) connection->close();
    });
    // Every connection now ends at its next step; only a name the system is still resolving keeps
    // the loop longer, and that one is not waited for here.
    std::unique_lock ending(s.ended_mutex);
    if (!s.ended_signal.wait_for(ending, std::chrono::seconds(1), [&s] { return s.ended; })) s.io->stop();
    ending.unlock();
    s.thread.join();
  }
  s.listeners.clear();
  // What is left of the loop goes with it, and so does Asio's resolver thread, which finishes the
  // lookup the system is making first.
  s.io.reset();
}

}  // namespace psych::host
