#pragma once
// A loopback HTTP server that answers each request with whatever its script writes, raw: the
// well-behaved answers and the hostile ones (a drip, an endless body, garbage, a redirect
// elsewhere) alike. It records every request it read, so a test can check what reached it.
#include <sys/socket.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>

namespace psych::testing {

struct received_request {
  std::string head;  ///< request line and header fields
  std::string body;
  [[nodiscard]] std::string target() const {
    const auto first = head.find(' ');
    return head.substr(first + 1, head.find(' ', first + 1) - first - 1);
  }
};

class scripted_server {
 public:
  using socket = boost::asio::ip::tcp::socket;
  /// Answers one request; the connection is closed when it returns.
  using script = std::function<void(const received_request&, socket&)>;

  explicit scripted_server(script answer) : answer_(std::move(answer)) {
    using boost::asio::ip::tcp;
    acceptor_.open(tcp::v4());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind({boost::asio::ip::make_address("127.0.0.1"), 0});
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    accepting_ = std::thread([this] { accept_loop(); });
  }

  ~scripted_server() {
    stopping_ = true;
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    accepting_.join();
    {
      std::lock_guard lock(mutex_);
      for (const auto& s : sockets_) ::shutdown(s->native_handle(), SHUT_RDWR);
    }
    for (auto& t : connections_) t.join();
  }

  [[nodiscard]] std::string url(std::string_view path = "") const {
    return "http://127.0.0.1:" + std::to_string(port_) + std::string(path);
  }
  [[nodiscard]] std::vector<received_request> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  [[nodiscard]] bool stopping() const { return stopping_; }

  /// A whole response with a body.
  static void respond(socket& s, int status, std::string_view body, std::string_view content_type = "application/json",
                      std::string_view extra_fields = "") {
    const std::string text = "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: " + std::string(content_type) +
                             "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + std::string(extra_fields) +
                             "\r\n" + std::string(body);
    boost::system::error_code ignored;
    boost::asio::write(s, boost::asio::buffer(text), ignored);
  }
  static bool write(socket& s, std::string_view bytes) {
    boost::system::error_code ec;
    boost::asio::write(s, boost::asio::buffer(bytes.data(), bytes.size()), ec);
    return !ec;
  }

 private:
  void accept_loop() {
    while (!stopping_) {
      auto s = std::make_shared<socket>(io_);
      boost::system::error_code ec;
      acceptor_.accept(*s, ec);
      if (ec || stopping_) return;
      std::lock_guard lock(mutex_);
      sockets_.push_back(s);
      connections_.emplace_back([this, s] { serve(*s); });
    }
  }

  void serve(socket& s) {
    boost::asio::streambuf buffer;
    boost::system::error_code ec;
    const std::size_t head_bytes = boost::asio::read_until(s, buffer, "\r\n\r\n", ec);
    if (ec) return;
    received_request request;
    request.head.assign(boost::asio::buffers_begin(buffer.data()), boost::asio::buffers_begin(buffer.data()) + head_bytes);
    buffer.consume(head_bytes);
    std::size_t length = 0;
    if (const auto at = request.head.find("Content-Length: "); at != std::string::npos)
      length = std::stoul(request.head.substr(at + 16));
    if (buffer.size() < length) boost::asio::read(s, buffer, boost::asio::transfer_exactly(length - buffer.size()), ec);
    request.body.assign(boost::asio::buffers_begin(buffer.data()), boost::asio::buffers_end(buffer.data()));
    {
      std::lock_guard lock(mutex_);
      requests_.push_back(request);
    }
    answer_(request, s);
    s.shutdown(socket::shutdown_both, ec);
  }

  script answer_;
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_{io_};
  unsigned short port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread accepting_;
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<socket>> sockets_;
  std::vector<std::thread> connections_;
  std::vector<received_request> requests_;
};

}  // namespace psych::testing
