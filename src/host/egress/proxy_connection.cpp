#include "egress/proxy_connection.hpp"

#include <array>
#include <functional>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <fmt/format.h>

namespace psych::host::egress {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using asio::ip::tcp;

namespace {

constexpr auto connection_tuple = asio::as_tuple(asio::use_awaitable);
/// How long a refusal's answer may take to write, and the client then to stop sending.
constexpr std::chrono::seconds last_words{2};
/// A head with its first bytes of body: the head's own bound is max_request_head_bytes.
constexpr std::size_t head_buffer_bytes = 2 * max_request_head_bytes;

}  // namespace

proxy_connection::proxy_connection(proxy_context& context, tcp::socket client, admission place)
    : context_(context),
      place_(place),
      client_(std::move(client)),
      upstream_(client_.get_executor()),
      clock_(client_.get_executor(), context.options.idle_timeout, context.options.connection_lifetime),
      dialer_(client_.get_executor(), context.options, context.own_listeners, context.names),
      buffer_(head_buffer_bytes),
      bytes_left_(context.options.connection_bytes),
      gate_(client_.get_executor(), asio::steady_timer::time_point::max()) {
  parser_.header_limit(max_request_head_bytes);
  parser_.body_limit(boost::none);  // the connection's byte bound counts the body instead
  (place_ == admission::served ? context_.serving : context_.turning_away) += 1;
  context_.live.insert(this);
}

proxy_connection::~proxy_connection() {
  (place_ == admission::served ? context_.serving : context_.turning_away) -= 1;
  context_.live.erase(this);
}

void proxy_connection::close() {
  ending_ = true;
  clock_.stop();
  dialer_.cancel();
  boost::system::error_code ignored;
  client_.close(ignored);
  upstream_.close(ignored);
  open_gate();
}

asio::awaitable<void> proxy_connection::watch(std::shared_ptr<proxy_connection> self) {
  const std::function<void()> on_expiry = std::bind_front(&proxy_connection::expire, self.get());
  co_await self->clock_.watch(on_expiry);
}

void proxy_connection::expire() {
  ++expiries_;
  dialer_.cancel();
  boost::system::error_code ignored;
  client_.cancel(ignored);
  upstream_.cancel(ignored);
}

void proxy_connection::end_both() {
  ending_ = true;
  boost::system::error_code ignored;
  client_.cancel(ignored);
  upstream_.cancel(ignored);
  open_gate();
}

void proxy_connection::record(const proxy_refusal& refusal) {
  context_.tally.refused({asked_host_, asked_port_, refusal.error, printable(refusal.detail)});
}

asio::awaitable<void> proxy_connection::refuse(const proxy_refusal& refusal) {
  record(refusal);
  if (refusal.status != 0) {
    clock_.step(last_words);
    const std::string answer = refusal_response(refusal);
    auto [ec, n] = co_await asio::async_write(client_, asio::buffer(answer), connection_tuple);
    if (ec) co_return;
  }
  co_await close_gently();
}

asio::awaitable<void> proxy_connection::close_gently() {
  boost::system::error_code ignored;
  client_.shutdown(tcp::socket::shutdown_send, ignored);
  const std::size_t expiries_before = expiries_;
  clock_.step(last_words);
  std::array<char, 4096> dropped;
  while (expiries_ == expiries_before) {
    auto [ec, n] = co_await client_.async_read_some(asio::buffer(dropped), connection_tuple);
    if (ec) break;  // the client's end of file, or the moment's end
  }
  client_.close(ignored);
}

asio::awaitable<void> proxy_connection::serve(std::shared_ptr<proxy_connection> self) {
  asio::co_spawn(self->client_.get_executor(), watch(self), asio::detached);
  co_await self->serve_head();
  self->clock_.stop();
  boost::system::error_code ignored;
  self->client_.close(ignored);
  self->upstream_.close(ignored);
}

asio::awaitable<void> proxy_connection::turn_away(std::shared_ptr<proxy_connection> self) {
  asio::co_spawn(self->client_.get_executor(), watch(self), asio::detached);
  const proxy_refusal busy{
      503, proxy_error::connection_limit_reached,
      fmt::format("the proxy serves {} connections at once already", self->context_.options.max_connections)};
  co_await self->refuse(busy);
  self->clock_.stop();
}

asio::awaitable<void> proxy_connection::serve_head() {
  const auto& options = context_.options;
  clock_.step(options.head_timeout);
  auto [ec, n] = co_await http::async_read_header(client_, buffer_, parser_, connection_tuple);
  if (clock_.expired() != expiry::none) {
    const proxy_refusal slow{408, proxy_error::http_request_error,
                             fmt::format("no whole request head within {}", bound_text(options.head_timeout))};
    co_await refuse(slow);
    co_return;
  }
  if (ec &&
      (ec == http::error::end_of_stream || ec.category() != http::make_error_code(http::error::bad_target).category()))
    co_return;  // the client left, or its connection failed: no one to answer
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
    const proxy_refusal large{431, proxy_error::http_request_error,
                              fmt::format("a request head over {} bytes", max_request_head_bytes)};
    co_await refuse(large);
    co_return;
  }
  if (ec) {
    const proxy_refusal garbled{400, proxy_error::http_request_error,
                                fmt::format("not an HTTP/1.x request: {}", ec.message())};
    co_await refuse(garbled);
    co_return;
  }
  const auto& head = parser_.get();
  auto target = read_target(head);
  if (!target) {
    asked_host_ = asked_authority(std::string_view(head.target().data(), head.target().size()));
    co_await refuse(target.error());
    co_return;
  }
  asked_host_ = target.value().host.host;
  asked_port_ = target.value().port;
  if (auto allowed = check_allowed(target.value(), options.allowed); !allowed) {
    co_await refuse(allowed.error());
    co_return;
  }
  clock_.step(options.connect_timeout);
  auto reached = co_await dialer_.reach(target.value(), upstream_);
  if (ending_) co_return;  // the proxy stops: no refusal to make
  if (!reached) {
    co_await refuse(reached.error());
    co_return;
  }
  clock_.step(std::nullopt);
  if (target.value().tunnel)
    co_await tunnel(target.value());
  else
    co_await forward(target.value());
}

}  // namespace psych::host::egress
