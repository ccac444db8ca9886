#pragma once
// The contract's frames over one byte stream (a Unix socket here; any Asio stream will do):
// frame_reader decodes them as the bytes arrive, bounded as they arrive; frame_writer sends them
// in order, one write at a time, without ever blocking the thread that reads.
#include <array>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "psych/protocol/json.hpp"
#include "psych/protocol/line_reader.hpp"
#include "psych/result.hpp"

namespace psych::host {

/// Frames from one stream, bounded as the bytes arrive.
template <class Stream>
class frame_reader {
 public:
  frame_reader(Stream& stream, protocol::stream_bounds bounds) : stream_(stream), lines_(bounds) {}

  /// The next frame, of one of the given types; nullopt once the stream ended cleanly (end of
  /// file, or the stream was closed under the read). A frame cut off by the end is an error.
  template <class... Frames>
  boost::asio::awaitable<result<std::optional<std::variant<Frames...>>>> next() {
    using frame = std::variant<Frames...>;
    while (pending_.empty()) {
      if (ended_) co_return std::optional<frame>{};
      boost::system::error_code ec;
      const auto n = co_await stream_.async_read_some(
          boost::asio::buffer(buffer_), boost::asio::redirect_error(boost::asio::use_awaitable, ec));
      if (ec) {
        ended_ = true;
        if (auto finished = lines_.finish(); !finished) co_return finished.error();
        continue;
      }
      auto fed = lines_.feed(std::string_view(buffer_.data(), n),
                             [this](std::string_view line) { pending_.emplace_back(line); });
      if (!fed) co_return fed.error();
    }
    const std::string line = std::move(pending_.front());
    pending_.pop_front();
    auto decoded = protocol::decode_frame<Frames...>(line);
    if (!decoded) co_return decoded.error();
    co_return std::optional<frame>(std::move(decoded).value());
  }

 private:
  Stream& stream_;
  protocol::line_reader lines_;
  std::deque<std::string> pending_;
  std::array<char, 64 * 1024> buffer_{};
  bool ended_ = false;
};

/// Frames to one stream, in the order they were sent, one write at a time while reading goes on.
/// A failed write means the peer is gone: what is queued is dropped and nothing more is sent
/// (the peer's going is reported by whoever watches it, not by the writer).
template <class Stream>
class frame_writer {
 public:
  explicit frame_writer(Stream& stream) : stream_(stream) {}
  frame_writer(const frame_writer&) = delete;
  frame_writer& operator=(const frame_writer&) = delete;

  template <class Frame>
  void send(const Frame& frame) {
    if (broken_) return;
    outbox_.push_back(protocol::encode_frame(frame));
    if (outbox_.size() == 1) write_next();
  }

  [[nodiscard]] bool broken() const noexcept { return broken_; }

 private:
  void write_next() {
    boost::asio::async_write(stream_, boost::asio::buffer(outbox_.front()),
                             [this](boost::system::error_code ec, std::size_t) {
                               outbox_.pop_front();
                               if (ec) {
                                 broken_ = true;
                                 outbox_.clear();
                               }
                               if (!outbox_.empty()) write_next();
                             });
  }

  Stream& stream_;
  std::deque<std::string> outbox_;
  bool broken_ = false;
};

}  // namespace psych::host
