#include "loopback_server.hpp"

#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace psych::testing {

namespace beast = boost::beast;
namespace http = boost::beast::http;

loopback_server::loopback_server(handler answer)
    : answer_(std::move(answer)), acceptor_(io_, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0)) {
  port_ = acceptor_.local_endpoint().port();
  acceptor_thread_ = std::thread([this] { accept_loop(); });
}

loopback_server::~loopback_server() {
  stopping_ = true;
  {
    // Wakes the accept with a connection of its own, then every connection's blocking read.
    boost::system::error_code ignored;
    tcp::socket waker(io_);
    waker.connect(acceptor_.local_endpoint(), ignored);
    acceptor_thread_.join();
  }
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    for (const auto& socket : sockets_) ::shutdown(socket->native_handle(), SHUT_RDWR);
    threads = std::move(threads_);
  }
  for (auto& thread : threads) thread.join();
}

std::string loopback_server::url(std::string_view path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + std::string(path);
}

std::vector<seen_request> loopback_server::requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

void loopback_server::accept_loop() {
  for (;;) {
    auto socket = std::make_shared<tcp::socket>(io_);
    boost::system::error_code ec;
    acceptor_.accept(*socket, ec);
    if (stopping_) return;
    if (ec) continue;
    ++connections_;
    std::lock_guard lock(mutex_);
    sockets_.push_back(socket);
    threads_.emplace_back([this, socket] { serve(socket); });
  }
}

void loopback_server::serve(std::shared_ptr<tcp::socket> socket) {
  beast::flat_buffer buffer;
  while (!stopping_) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(1 << 20);
    boost::system::error_code ec;
    http::read(*socket, buffer, parser, ec);
    if (ec) break;
    const auto& message = parser.get();
    seen_request seen{.method = std::string(message.method_string()), .target = std::string(message.target()),
                      .headers = {}, .body = message.body()};
    for (const auto& field : message) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      seen.headers[name] = std::string(field.value());
    }
    {
      std::lock_guard lock(mutex_);
      requests_.push_back(seen);
    }
    if (!answer_(seen, *socket, *this)) break;
  }
  boost::system::error_code ignored;
  socket->shutdown(tcp::socket::shutdown_both, ignored);
}

bool loopback_server::respond(tcp::socket& socket, unsigned status, std::string_view content_type,
                              std::string_view body, const std::vector<std::pair<std::string, std::string>>& headers) {
  http::response<http::string_body> response{static_cast<http::status>(status), 11};
  if (!content_type.empty()) response.set(http::field::content_type, content_type);
  for (const auto& [name, value] : headers) response.set(name, value);
  response.body() = std::string(body);
  response.prepare_payload();
  boost::system::error_code ec;
  http::write(socket, response, ec);
  return !ec;
}

bool loopback_server::write_raw(tcp::socket& socket, std::string_view bytes) {
  boost::system::error_code ec;
  boost::asio::write(socket, boost::asio::buffer(bytes.data(), bytes.size()), ec);
  return !ec;
}

}  // namespace psych::testing
