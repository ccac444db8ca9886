#include "egress/upstream_dialer.hpp"

#include <algorithm>
#include <optional>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include "egress/address_class.hpp"

namespace psych::host::egress {

namespace asio = boost::asio;
using asio::ip::tcp;

egress_resolver system_resolver() {
  return [](const asio::any_io_executor& executor, const std::string& host, std::function<void(egress_answer)> done) {
    auto resolver = std::make_shared<tcp::resolver>(executor);
    resolver->async_resolve(host, "0", tcp::resolver::numeric_service,
                            [resolver, done = std::move(done)](const boost::system::error_code& ec,
                                                               const tcp::resolver::results_type& found) {
                              if (ec) return done(fail_with(error_kind::sandbox_setup, ec.message()));
                              std::vector<asio::ip::address> addresses;
                              for (const auto& entry : found)
                                if (std::ranges::find(addresses, entry.endpoint().address()) == addresses.end())
                                  addresses.push_back(entry.endpoint().address());
                              done(std::move(addresses));
                            });
  };
}

/// An answer that may come later than the connection waits: the resolver's callback holds it too.
struct upstream_dialer::pending_answer {
  explicit pending_answer(const asio::any_io_executor& executor)
      : ready(executor, asio::steady_timer::time_point::max()) {}
  asio::steady_timer ready;
  std::optional<egress_answer> answer;
};

upstream_dialer::upstream_dialer(const asio::any_io_executor& executor, const egress_proxy_options& options,
                                 const std::vector<tcp::endpoint>& own_listeners, name_cache& names)
    : executor_(executor), options_(options), own_listeners_(own_listeners), names_(names) {}

void upstream_dialer::cancel() {
  cancelled_ = true;
  if (waiting_) waiting_->ready.cancel();
}

asio::awaitable<egress_answer> upstream_dialer::resolve(const std::string& host) {
  auto waiting = std::make_shared<pending_answer>(executor_);
  waiting_ = waiting;
  options_.resolve(executor_, host, [waiting](egress_answer answer) {
    if (waiting->answer) return;
    waiting->answer = std::move(answer);
    waiting->ready.cancel();
  });
  if (!waiting->answer && !cancelled_) co_await waiting->ready.async_wait(asio::as_tuple(asio::use_awaitable));
  waiting_.reset();
  if (!waiting->answer) co_return fail_with(error_kind::sandbox_setup, "cancelled");
  co_return std::move(*waiting->answer);
}

asio::awaitable<refusal_or<void>> upstream_dialer::reach(const proxy_target& target, tcp::socket& socket) {
  const std::string& host = target.host.host;
  if (target.host.ip_literal) {
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(host, ec);
    if (ec)
      co_return proxy_refusal{400, proxy_error::http_request_error,
                              fmt::format("the address {}: {}", host, ec.message())};
    const std::vector<asio::ip::address> only{address};
    co_return co_await connect(target, only, socket);
  }
  auto addresses = co_await addresses_of(host, false);
  if (!addresses) co_return addresses.error();
  auto reached = co_await connect(target, addresses.value().permitted, socket);
  if (reached) co_return reached;
  // None of the answer's addresses answered: the name may have moved, and the next connection asks
  // anew. This one does too, at once, if its answer was a reused one (and time is left).
  names_.forget(host);
  if (!addresses.value().reused || cancelled_) co_return reached;
  auto fresh = co_await addresses_of(host, true);
  if (!fresh) co_return fresh.error();
  if (fresh.value().permitted == addresses.value().permitted) co_return reached;  // the same: no second try
  co_return co_await connect(target, fresh.value().permitted, socket);
}

asio::awaitable<refusal_or<upstream_dialer::destination_addresses>> upstream_dialer::addresses_of(
    const std::string& host, bool fresh) {
  destination_addresses out;
  std::vector<asio::ip::address> answer;
  if (auto kept = fresh ? std::nullopt : names_.find(host, name_cache::clock::now())) {
    answer = std::move(*kept);
    out.reused = true;
  } else {
    auto resolved = co_await resolve(host);
    if (cancelled_)
      co_return proxy_refusal{
          504, proxy_error::dns_timeout,
          fmt::format("resolving {} took longer than {}", host, bound_text(options_.connect_timeout))};
    if (!resolved)
      co_return proxy_refusal{502, proxy_error::dns_error,
                              fmt::format("resolving {}: {}", host, resolved.error().detail)};
    if (resolved.value().empty())
      co_return proxy_refusal{502, proxy_error::dns_error, fmt::format("{} has no address", host)};
    answer = std::move(resolved).value();
    if (options_.name_cache_for.count() > 0) {
      const auto now = name_cache::clock::now();
      names_.keep(host, answer, now + options_.name_cache_for, now);
    }
  }
  auto vetted = vet(answer, options_.treat_as_public);
  if (vetted.permitted.empty())
    co_return proxy_refusal{
        403, proxy_error::destination_ip_prohibited,
        fmt::format("{} resolves only to addresses never connected to on a name's behalf: {}", host, vetted.refused)};
  out.permitted = std::move(vetted.permitted);
  co_return out;
}

asio::awaitable<refusal_or<void>> upstream_dialer::connect(const proxy_target& target,
                                                           const std::vector<asio::ip::address>& addresses,
                                                           tcp::socket& socket) {
  std::optional<boost::system::error_code> last_failure;
  for (const auto& address : addresses) {
    const tcp::endpoint destination(address, target.port);
    if (std::ranges::find(own_listeners_, destination) != own_listeners_.end()) continue;
    boost::system::error_code ec;
    socket.close(ec);
    socket.open(destination.protocol(), ec);
    if (!ec) std::tie(ec) = co_await socket.async_connect(destination, asio::as_tuple(asio::use_awaitable));
    if (cancelled_)
      co_return proxy_refusal{504, proxy_error::connection_timeout,
                              fmt::format("connecting to {} took longer than {}", target.authority(),
                                          bound_text(options_.connect_timeout))};
    if (!ec) {
      socket.set_option(tcp::no_delay(true), ec);  // a tunnel's small writes (TLS handshakes) go at once
      co_return boost::outcome_v2::success();
    }
    last_failure = ec;
  }
  if (!last_failure)
    co_return proxy_refusal{403, proxy_error::destination_ip_prohibited,
                            fmt::format("{} is the proxy's own listener", target.authority())};
  if (*last_failure == asio::error::connection_refused)
    co_return proxy_refusal{502, proxy_error::connection_refused,
                            fmt::format("{} refused the connection", target.authority())};
  co_return proxy_refusal{502, proxy_error::destination_unavailable,
                          fmt::format("connecting to {}: {}", target.authority(), last_failure->message())};
}

}  // namespace psych::host::egress
