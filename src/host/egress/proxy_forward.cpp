// One plain HTTP request: its head sent on in origin-form with Connection: close, its body as the
// head's parser frames it (so no second request can ride in it), the answer relayed back as it comes
// until the destination closes. A second request on the same connection is not served.
#include <array>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <fmt/format.h>

#include "egress/proxy_connection.hpp"

namespace psych::host::egress {

namespace asio = boost::asio;
namespace http = boost::beast::http;

namespace {

constexpr std::size_t body_piece = 64 * 1024;

}  // namespace

asio::awaitable<void> proxy_connection::forward(const proxy_target& target) {
  using namespace asio::experimental::awaitable_operators;
  body_framing framing{parser_.chunked(), std::nullopt};
  if (const auto length = parser_.content_length()) framing.content_length = *length;
  clock_.flowing();
  const std::string head = upstream_head(parser_.get(), target, framing);
  const auto head_sent = co_await send(upstream_, head);
  if (head_sent != relay_end::finished) {
    count_cut(head_sent, relay_end::stopped);
    co_return;
  }
  context_.tally.allowed();
  const auto [body_end, answer_end] = co_await (send_body(framing.chunked) && answer_back());
  count_cut(body_end, answer_end);
  if (answer_end == relay_end::finished) co_await close_gently();
}

asio::awaitable<proxy_connection::relay_end> proxy_connection::answer_back() {
  const auto end = co_await relay(upstream_, client_);
  if (end == relay_end::finished) {
    // The answer is whole: what is left of the body is not wanted, and nothing after it is served.
    ending_ = true;
    boost::system::error_code ignored;
    client_.cancel(ignored);
  }
  co_return end;
}

asio::awaitable<proxy_connection::relay_end> proxy_connection::send_body(bool chunked) {
  if (parser_.is_done()) co_return relay_end::finished;
  const auto piece = std::make_unique_for_overwrite<char[]>(body_piece);
  while (!parser_.is_done()) {
    auto& body = parser_.get().body();
    body.data = piece.get();
    body.size = body_piece;
    auto [ec, n] = co_await http::async_read(client_, buffer_, parser_, asio::as_tuple(asio::use_awaitable));
    if (ending_ || clock_.expired() != expiry::none) co_return relay_end::stopped;
    const std::size_t got = body_piece - body.size;
    if ((ec && ec != http::error::need_buffer) || (got == 0 && !parser_.is_done())) {
      // A body cut short or malformed: the destination sees the connection end before the body
      // does, so it never takes what it got for a whole request.
      end_both();
      co_return relay_end::failed;
    }
    clock_.touch();
    const std::string_view bytes(piece.get(), got);
    relay_end sent = relay_end::finished;
    if (!chunked) {
      sent = co_await send(upstream_, bytes);
    } else {
      std::string framed = got > 0 ? fmt::format("{:x}\r\n{}\r\n", got, bytes) : std::string();
      if (parser_.is_done()) framed += "0\r\n\r\n";  // the last chunk: the client's trailer fields stay behind
      if (!framed.empty()) sent = co_await send(upstream_, framed);
    }
    if (sent != relay_end::finished) co_return sent;
  }
  co_return relay_end::finished;
}

}  // namespace psych::host::egress
