#include "raw_client.hpp"

#include <chrono>

#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

namespace remote_test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using error_code = boost::system::error_code;

namespace {

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

template <class Message>
raw_response response_of(const Message& message) {
  raw_response out;
  out.status = message.result_int();
  out.content_type = std::string(message[http::field::content_type]);
  out.www_authenticate = std::string(message[http::field::www_authenticate]);
  out.retry_after = std::string(message[http::field::retry_after]);
  for (const auto& field : message) out.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  return out;
}

}  // namespace

struct raw_connection::impl {
  asio::io_context io;
  asio::ssl::context context{asio::ssl::context::tls_client};
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls;
  std::unique_ptr<beast::tcp_stream> plain;
  beast::flat_buffer buffer;
  std::optional<http::response_parser<http::buffer_body>> streaming;  ///< read_response_header's

  beast::tcp_stream& tcp() { return tls ? beast::get_lowest_layer(*tls) : *plain; }

  /// Starts an operation with `start(handler)` and runs the loop until it completes; the stream's
  /// expiry bounds it (beast::error::timeout).
  template <class Start>
  error_code run(Start&& start, double timeout_seconds) {
    tcp().expires_after(millis(timeout_seconds));
    std::optional<error_code> out;
    start([&out](error_code ec, auto&&...) { out = ec; });
    io.restart();
    io.run();
    return out.value_or(asio::error::operation_aborted);
  }

  template <class F>
  auto with(F&& f) {
    if (tls) return f(*tls);
    return f(*plain);
  }
};

std::string raw_response::header(std::string_view name) const {
  for (const auto& [field, value] : headers)
    if (beast::iequals(field, name)) return value;
  return {};
}

raw_connection::raw_connection(std::unique_ptr<impl> state) : impl_(std::move(state)) {}
raw_connection::~raw_connection() {
  error_code ignored;
  impl_->tcp().socket().close(ignored);
}

std::unique_ptr<raw_connection> raw_connection::open(std::uint16_t port, bool tls, std::string* why) {
  auto state = std::make_unique<impl>();
  state->context.set_verify_mode(asio::ssl::verify_none);
  const asio::ip::tcp::endpoint to(asio::ip::make_address("127.0.0.1"), port);
  if (tls) {
    state->tls = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(state->io, state->context);
  } else {
    state->plain = std::make_unique<beast::tcp_stream>(state->io);
  }
  auto* s = state.get();
  auto ec = s->run([&](auto handler) { s->tcp().async_connect(to, std::move(handler)); }, 5);
  if (!ec && tls)
    ec = s->run([&](auto handler) { s->tls->async_handshake(asio::ssl::stream_base::client, std::move(handler)); }, 5);
  if (ec) {
    if (why) *why = "connecting: " + ec.message();
    return nullptr;
  }
  return std::unique_ptr<raw_connection>(new raw_connection(std::move(state)));
}

bool raw_connection::send(std::string_view bytes, double timeout_seconds) {
  auto* s = impl_.get();
  const auto ec = s->run(
      [&](auto handler) {
        s->with([&](auto& stream) { asio::async_write(stream, asio::buffer(bytes.data(), bytes.size()), std::move(handler)); });
      },
      timeout_seconds);
  return !ec;
}

bool raw_connection::send_request(const std::string& method, const std::string& target, const header_list& headers,
                                  const std::string& body, double timeout_seconds) {
  http::request<http::string_body> request{http::string_to_verb(method), target, 11};
  request.set(http::field::host, "127.0.0.1");
  for (const auto& [name, value] : headers) request.set(name, value);
  request.body() = body;
  if (!body.empty() || method == "POST") request.prepare_payload();
  auto* s = impl_.get();
  const auto ec = s->run(
      [&](auto handler) { s->with([&](auto& stream) { http::async_write(stream, request, std::move(handler)); }); },
      timeout_seconds);
  return !ec;
}

std::optional<raw_response> raw_connection::read_response(double timeout_seconds, std::string* why) {
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  auto* s = impl_.get();
  const auto ec = s->run(
      [&](auto handler) {
        s->with([&](auto& stream) { http::async_read(stream, s->buffer, parser, std::move(handler)); });
      },
      timeout_seconds);
  if (ec) {
    if (why) *why = "reading the response: " + ec.message();
    return std::nullopt;
  }
  raw_response out = response_of(parser.get());
  out.body = std::move(parser.get().body());
  return out;
}

std::optional<raw_response> raw_connection::read_response_header(double timeout_seconds, std::string* why) {
  auto* s = impl_.get();
  auto& parser = s->streaming.emplace();
  parser.body_limit(boost::none);
  const auto ec = s->run(
      [&](auto handler) {
        s->with([&](auto& stream) { http::async_read_header(stream, s->buffer, parser, std::move(handler)); });
      },
      timeout_seconds);
  if (ec) {
    if (why) *why = "reading the response header: " + ec.message();
    return std::nullopt;
  }
  return response_of(parser.get());
}

std::optional<std::string> raw_connection::read_body_some(double timeout_seconds, bool* ended, std::string* why) {
  auto* s = impl_.get();
  if (!s->streaming) {
    if (why) *why = "no response header was read";
    return std::nullopt;
  }
  auto& parser = *s->streaming;
  *ended = parser.is_done();
  if (*ended) return std::string{};
  std::string chunk(64 * 1024, '\0');
  parser.get().body().data = chunk.data();
  parser.get().body().size = chunk.size();
  auto ec = s->run(
      [&](auto handler) {
        s->with([&](auto& stream) { http::async_read_some(stream, s->buffer, parser, std::move(handler)); });
      },
      timeout_seconds);
  if (ec == http::error::need_buffer) ec = {};
  if (ec) {
    if (why) *why = "reading the response body: " + ec.message();
    return std::nullopt;
  }
  chunk.resize(chunk.size() - parser.get().body().size);
  *ended = parser.is_done();
  return chunk;
}

bool raw_connection::closed_within(double timeout_seconds) {
  // Not the stream's expiry: that would close the connection itself when the time runs out.
  auto* s = impl_.get();
  s->tcp().expires_never();
  const auto deadline = std::chrono::steady_clock::now() + millis(timeout_seconds);
  char sink[16 * 1024];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    std::optional<error_code> out;
    s->with([&](auto& stream) { stream.async_read_some(asio::buffer(sink), [&out](error_code ec, std::size_t) { out = ec; }); });
    s->io.restart();
    s->io.run_for(left);
    if (!out) {
      error_code ignored;
      s->tcp().socket().cancel(ignored);
      s->io.restart();
      s->io.run();
      return false;
    }
    if (*out) return true;  // eof, a reset, a TLS stream cut short: the peer is gone
  }
}

std::optional<raw_response> raw_request(std::uint16_t port, const std::string& method, const std::string& target,
                                        const header_list& headers, const std::string& body, std::string* why,
                                        double timeout_seconds) {
  auto connection = raw_connection::open(port, true, why);
  if (!connection) return std::nullopt;
  if (!connection->send_request(method, target, headers, body, timeout_seconds)) {
    if (why) *why = "sending the request failed";
    return std::nullopt;
  }
  return connection->read_response(timeout_seconds, why);
}

}  // namespace remote_test
