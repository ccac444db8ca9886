#pragma once
// One HTTP connection of the remote protocol, TLS (Asio's OpenSSL stream) or, where allowed,
// plain; and the bounded, yielding reader of an NDJSON body that both sides use. Beast parses
// HTTP; nothing here does. docs/remote-protocol.md.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "psych/protocol/json.hpp"
#include "psych/protocol/line_reader.hpp"
#include "psych/result.hpp"

namespace psych::host {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using asio::awaitable;
inline constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

/// Seconds as an Asio duration; a negative figure is none.
inline std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::max(0.0, seconds) * 1000));
}

/// A TLS context of either side with the protocol versions both accept (TLS 1.2 and later).
std::unique_ptr<asio::ssl::context> tls_context(asio::ssl::context::method method);

/// Where a sandbox service is: from "https://host:port" (a trailing '/' allowed, nothing else).
struct service_endpoint {
  bool tls = true;
  std::string host;  ///< a name, or an address (an IPv6 one without its brackets)
  std::string port;
  std::string authority;  ///< what the Host header says
};

result<service_endpoint> parse_service_url(std::string_view url);

/// "localhost", 127.0.0.0/8 or ::1: traffic that never leaves this machine.
bool is_loopback_host(std::string_view host);

/// At most `limit` bytes of text from the other side, safe to put in a message: anything but
/// printable ASCII becomes '?'. A hostile peer's words never reach a terminal or a log raw.
std::string peer_excerpt(std::string_view text, std::size_t limit = 200);

using tls_stream = beast::ssl_stream<beast::tcp_stream>;

/// One connection, TLS or plain. Timeouts are the TCP stream's (expires_after on every step).
class http_link {
 public:
  /// Resolves, connects and (for https) handshakes, verifying the peer against `tls` (the CA and the
  /// host name). `session`: a TLS session to resume, if any.
  static awaitable<result<std::unique_ptr<http_link>>> open(const service_endpoint& where, asio::ssl::context* tls,
                                                            std::chrono::steady_clock::duration timeout,
                                                            SSL_SESSION* session = nullptr);

  explicit http_link(beast::tcp_stream plain) : stream_(std::move(plain)) {}
  explicit http_link(std::unique_ptr<tls_stream> tls) : stream_(std::move(tls)) {}

  /// Calls `f` with the stream (tls_stream& or beast::tcp_stream&); both calls must return one type.
  template <class F>
  auto with(F&& f) {
    if (auto* tls = std::get_if<std::unique_ptr<tls_stream>>(&stream_)) return f(**tls);
    return f(std::get<beast::tcp_stream>(stream_));
  }
  beast::tcp_stream& tcp() {
    if (auto* tls = std::get_if<std::unique_ptr<tls_stream>>(&stream_)) return beast::get_lowest_layer(**tls);
    return std::get<beast::tcp_stream>(stream_);
  }
  /// The TLS session to resume next time (a new reference), or null.
  SSL_SESSION* session() const;
  beast::flat_buffer& buffer() { return buffer_; }
  void close();

 private:
  std::variant<beast::tcp_stream, std::unique_ptr<tls_stream>> stream_;
  beast::flat_buffer buffer_{64 * 1024};
};

/// Every few hundred lines the reader hands the event loop back, so a timer can still fire against
/// a stream that is nothing but tiny frames: at most this many bytes are parsed between two turns.
inline constexpr std::size_t ndjson_chunk_bytes = 8 * 1024;

/// Reads one HTTP message's body (a parser already past its header) as NDJSON frames, bounded as
/// the bytes arrive (line_reader) and yielding to the event loop after every chunk.
template <class Stream, bool IsRequest>
class ndjson_body_reader {
 public:
  ndjson_body_reader(Stream& stream, beast::flat_buffer& buffer, http::parser<IsRequest, http::buffer_body>& parser,
                     protocol::stream_bounds bounds)
      : stream_(stream), buffer_(buffer), parser_(parser), lines_(bounds), json_{.max_bytes = bounds.max_frame_bytes} {}

  /// The next frame, of one of the given types; nullopt once the body ended cleanly. An error for a
  /// bound crossed, a frame cut off, a malformed frame, or the connection failing.
  template <class... Frames>
  awaitable<result<std::optional<std::variant<Frames...>>>> next() {
    using frame = std::variant<Frames...>;
    while (pending_.empty()) {
      if (ended_) co_return std::optional<frame>{};
      if (parser_.is_done()) {
        ended_ = true;
        if (auto finished = lines_.finish(); !finished) co_return finished.error();
        continue;
      }
      parser_.get().body().data = chunk_.data();
      parser_.get().body().size = chunk_.size();
      parser_.get().body().more = true;
      auto [ec, n] = co_await http::async_read_some(stream_, buffer_, parser_, use_tuple);
      if (ec == http::error::need_buffer) ec = {};
      if (ec) {
        if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::ssl::error::stream_truncated)
          co_return fail_with(error_kind::truncated_frame, "the stream ended before its last frame");
        co_return fail_with(error_kind::truncated_frame, "the connection failed: " + ec.message());
      }
      const std::size_t got = chunk_.size() - parser_.get().body().size;
      auto fed = lines_.feed(std::string_view(chunk_.data(), got),
                             [this](std::string_view line) { pending_.emplace_back(line); });
      if (!fed) co_return fed.error();
      co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
    }
    const std::string line = std::move(pending_.front());
    pending_.pop_front();
    auto decoded = protocol::decode_frame<Frames...>(line, json_);
    if (!decoded) co_return decoded.error();
    co_return std::optional<frame>(std::move(decoded).value());
  }

  [[nodiscard]] const protocol::line_reader& lines() const noexcept { return lines_; }

 private:
  Stream& stream_;
  beast::flat_buffer& buffer_;
  http::parser<IsRequest, http::buffer_body>& parser_;
  protocol::line_reader lines_;
  protocol::json_bounds json_;
  std::deque<std::string> pending_;
  std::array<char, ndjson_chunk_bytes> chunk_{};
  bool ended_ = false;
};

/// Header fields beyond which a message is refused, whatever their size: the parser's header_limit
/// bounds their bytes, this their number.
inline constexpr std::size_t max_header_fields = 64;
inline constexpr std::uint32_t max_header_bytes = 16 * 1024;

template <class Fields>
bool too_many_fields(const Fields& fields) {
  return static_cast<std::size_t>(std::distance(fields.begin(), fields.end())) > max_header_fields;
}

}  // namespace psych::host
