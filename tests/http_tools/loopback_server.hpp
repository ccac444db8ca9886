#pragma once
// An HTTP server on 127.0.0.1 (an ephemeral port) inside the test process, for http_tools_tests: it
// records every request it reads and answers each as the test's handler says, well or with hostile
// intent (a drip, a gigabyte, an echo of the credential). Beast parses; one thread per connection;
// the destructor shuts every connection down and joins every thread, so nothing outlives a test.
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace psych::testing {

struct seen_request {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  ///< names in lower case
  std::string body;
};

class loopback_server {
 public:
  using tcp = boost::asio::ip::tcp;
  /// Answers one request on `socket`; returns false to close the connection.
  using handler = std::function<bool(const seen_request&, tcp::socket& socket, const loopback_server& server)>;

  explicit loopback_server(handler answer);
  ~loopback_server();
  loopback_server(const loopback_server&) = delete;
  loopback_server& operator=(const loopback_server&) = delete;

  [[nodiscard]] unsigned short port() const { return port_; }
  /// "http://127.0.0.1:<port>" followed by `path`.
  [[nodiscard]] std::string url(std::string_view path = "") const;
  [[nodiscard]] std::vector<seen_request> requests() const;
  /// Connections accepted, whether or not a request came on them.
  [[nodiscard]] int connections() const { return connections_.load(); }
  /// True once the destructor began: a long answer (a drip) checks it between writes.
  [[nodiscard]] bool stopping() const { return stopping_.load(); }

  // Answers a handler may write.
  static bool respond(tcp::socket& socket, unsigned status, std::string_view content_type, std::string_view body,
                      const std::vector<std::pair<std::string, std::string>>& headers = {});
  /// Writes raw bytes; false when the peer has gone.
  static bool write_raw(tcp::socket& socket, std::string_view bytes);

 private:
  void accept_loop();
  void serve(std::shared_ptr<tcp::socket> socket);

  handler answer_;
  boost::asio::io_context io_;
  tcp::acceptor acceptor_;
  unsigned short port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  mutable std::mutex mutex_;
  std::vector<seen_request> requests_;
  std::vector<std::shared_ptr<tcp::socket>> sockets_;
  std::vector<std::thread> threads_;
  std::thread acceptor_thread_;
};

}  // namespace psych::testing
