#pragma once
// The proxy tests' fake internet, all on loopback: servers that run a script per connection (an
// echo, a TLS echo, an HTTP answer), a fake DNS, a self-signed TLS identity made in memory, and
// the raw client a sandboxed program would be. Nothing here leaves the machine.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "egress/egress_proxy.hpp"
#include "os/posix.hpp"

namespace egress_test {

using namespace std::chrono_literals;
using psych::host::unique_fd;

/// A TCP socket listening on 127.0.0.1 at a free port.
inline unique_fd loopback_listener(std::uint16_t& port) {
  unique_fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(fd.valid());
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), size) == 0);
  REQUIRE(::listen(fd.get(), 64) == 0);
  REQUIRE(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &size) == 0);
  port = ntohs(address.sin_port);
  return fd;
}

/// A port on 127.0.0.1 where nothing listens (it did a moment ago).
inline std::uint16_t closed_port() {
  std::uint16_t port = 0;
  (void)loopback_listener(port);
  return port;
}

/// A blocking TCP connection with every wait bounded: the program's side.
class raw_socket {
 public:
  explicit raw_socket(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    REQUIRE(fd_.valid());
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    REQUIRE(::connect(fd_.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    const int on = 1;
    ::setsockopt(fd_.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  }
  explicit raw_socket(unique_fd accepted) : fd_(std::move(accepted)) {}

  [[nodiscard]] int fd() const { return fd_.get(); }

  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  /// Reads until `done(all read so far)`, the peer's end (`ended()`), or `limit`.
  std::string read_until(const std::function<bool(const std::string&)>& done, std::chrono::milliseconds limit = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    std::string got;
    char piece[16384];
    while (!done(got)) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd watched{fd_.get(), POLLIN, 0};
      if (left.count() <= 0 || ::poll(&watched, 1, static_cast<int>(left.count())) <= 0) break;
      const ssize_t n = ::recv(fd_.get(), piece, sizeof piece, 0);
      if (n <= 0) {
        ended_ = true;
        break;
      }
      got.append(piece, static_cast<std::size_t>(n));
    }
    return got;
  }
  std::string read_head(std::chrono::milliseconds limit = 10s) {
    return read_until([](const std::string& got) { return got.find("\r\n\r\n") != std::string::npos; }, limit);
  }
  std::string read_bytes(std::size_t count, std::chrono::milliseconds limit = 10s) {
    return read_until([count](const std::string& got) { return got.size() >= count; }, limit);
  }
  std::string read_to_end(std::chrono::milliseconds limit = 10s) {
    return read_until([](const std::string&) { return false; }, limit);
  }
  /// The peer ended the connection (end of file or reset) during a read.
  [[nodiscard]] bool ended() const { return ended_; }
  void shut_sending() { ::shutdown(fd_.get(), SHUT_WR); }

 private:
  unique_fd fd_;
  bool ended_ = false;
};

/// A server on 127.0.0.1 that runs `script` on each connection it accepts, each in its own thread;
/// its destructor ends every connection and joins them.
class loopback_server {
 public:
  using script = std::function<void(raw_socket&)>;

  explicit loopback_server(script serve) : serve_(std::move(serve)), listener_(loopback_listener(port_)) {
    accepting_ = std::thread([this] {
      for (;;) {
        unique_fd accepted(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!accepted.valid()) return;  // shut down by the destructor
        std::lock_guard lock(mutex_);
        if (stopping_) return;
        auto connection = std::make_shared<raw_socket>(std::move(accepted));
        open_.push_back(connection);
        ++accepted_;
        workers_.emplace_back([this, connection] { serve_(*connection); });
      }
    });
  }
  loopback_server(const loopback_server&) = delete;
  loopback_server& operator=(const loopback_server&) = delete;
  ~loopback_server() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      for (const auto& connection : open_) ::shutdown(connection->fd(), SHUT_RDWR);
    }
    ::shutdown(listener_.get(), SHUT_RDWR);
    accepting_.join();
    for (auto& worker : workers_) worker.join();
  }

  [[nodiscard]] std::uint16_t port() const { return port_; }
  [[nodiscard]] int accepted() const {
    std::lock_guard lock(mutex_);
    return accepted_;
  }

 private:
  script serve_;
  std::uint16_t port_ = 0;
  unique_fd listener_;
  mutable std::mutex mutex_;
  bool stopping_ = false;
  int accepted_ = 0;
  std::vector<std::shared_ptr<raw_socket>> open_;
  std::vector<std::thread> workers_;
  std::thread accepting_;
};

/// Echoes what it reads until the client ends its side, then ends its own.
inline void echo(raw_socket& connection) {
  char piece[65536];
  for (;;) {
    const ssize_t n = ::recv(connection.fd(), piece, sizeof piece, 0);
    if (n <= 0 || !connection.send(std::string_view(piece, static_cast<std::size_t>(n)))) break;
  }
  connection.shut_sending();
}

/// A fake DNS: each name's addresses, and "no such name" for the rest.
inline psych::host::egress_resolver fake_dns(std::map<std::string, std::vector<std::string>> names) {
  return [names = std::move(names)](const boost::asio::any_io_executor&, const std::string& host,
                                    std::function<void(psych::host::egress_answer)> done) {
    const auto found = names.find(host);
    if (found == names.end())
      return done(psych::fail_with(psych::error_kind::invalid_argument, "no such name (fake DNS)"));
    std::vector<boost::asio::ip::address> addresses;
    for (const auto& text : found->second) addresses.push_back(boost::asio::ip::make_address(text));
    done(std::move(addresses));
  };
}

/// A DNS that never answers.
inline psych::host::egress_resolver silent_dns() {
  return
      [](const boost::asio::any_io_executor&, const std::string&, std::function<void(psych::host::egress_answer)>) {};
}

/// A self-signed certificate and its key, made in memory, for the TLS servers of the fake internet.
/// Clients do not verify it: what is under test is the proxy, not the certificate.
struct tls_identity {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> server{nullptr, SSL_CTX_free};
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> client{nullptr, SSL_CTX_free};

  tls_identity() {
    std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), EVP_PKEY_free);
    std::unique_ptr<X509, decltype(&X509_free)> certificate(X509_new(), X509_free);
    REQUIRE(key);
    REQUIRE(certificate);
    X509_set_version(certificate.get(), 2);
    ASN1_INTEGER_set(X509_get_serialNumber(certificate.get()), 1);
    X509_gmtime_adj(X509_getm_notBefore(certificate.get()), -60);
    X509_gmtime_adj(X509_getm_notAfter(certificate.get()), 3600);
    X509_set_pubkey(certificate.get(), key.get());
    X509_NAME* name = X509_get_subject_name(certificate.get());
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("fake internet"), -1,
                               -1, 0);
    X509_set_issuer_name(certificate.get(), name);
    REQUIRE(X509_sign(certificate.get(), key.get(), EVP_sha256()) > 0);
    server.reset(SSL_CTX_new(TLS_server_method()));
    client.reset(SSL_CTX_new(TLS_client_method()));
    REQUIRE(server);
    REQUIRE(client);
    REQUIRE(SSL_CTX_use_certificate(server.get(), certificate.get()) == 1);
    REQUIRE(SSL_CTX_use_PrivateKey(server.get(), key.get()) == 1);
    SSL_CTX_set_verify(client.get(), SSL_VERIFY_NONE, nullptr);
  }
};

/// One TLS connection over a raw socket, either side; reads and writes bounded by the socket's timeouts.
class tls_session {
 public:
  tls_session(SSL_CTX* context, int fd) : ssl_(SSL_new(context), SSL_free) {
    // OpenSSL writes with write(2), which raises SIGPIPE when the other end has gone (the proxy
    // closing a refused tunnel): the test's TLS ends take EPIPE instead.
    static const bool sigpipe_ignored = std::signal(SIGPIPE, SIG_IGN) != SIG_ERR;
    (void)sigpipe_ignored;
    const timeval bound{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof bound);
    SSL_set_fd(ssl_.get(), fd);
  }
  /// The client's handshake, naming `server_name` (none when empty). The OpenSSL error when it fails.
  std::string connect(const std::string& server_name) {
    if (!server_name.empty()) SSL_set_tlsext_host_name(ssl_.get(), server_name.c_str());
    return SSL_connect(ssl_.get()) == 1 ? "" : last_error();
  }
  std::string accept() { return SSL_accept(ssl_.get()) == 1 ? "" : last_error(); }
  [[nodiscard]] std::string server_name() const {
    const char* name = SSL_get_servername(ssl_.get(), TLSEXT_NAMETYPE_host_name);
    return name ? name : "";
  }
  bool write(std::string_view bytes) {
    return SSL_write(ssl_.get(), bytes.data(), static_cast<int>(bytes.size())) == static_cast<int>(bytes.size());
  }
  std::string read(std::size_t count) {
    std::string got;
    char piece[16384];
    while (got.size() < count) {
      const int n = SSL_read(ssl_.get(), piece, static_cast<int>(std::min(sizeof piece, count - got.size())));
      if (n <= 0) break;
      got.append(piece, static_cast<std::size_t>(n));
    }
    return got;
  }
  void close() { SSL_shutdown(ssl_.get()); }

 private:
  static std::string last_error() {
    char text[256] = "no OpenSSL error queued";
    if (const unsigned long code = ERR_get_error()) ERR_error_string_n(code, text, sizeof text);
    ERR_clear_error();
    return text;
  }
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl_;
};

/// A TLS server's script: handshake, then echo what comes until the client's close; the server
/// name each client asked for is kept in `names`.
inline loopback_server::script tls_echo(SSL_CTX* context, std::shared_ptr<std::vector<std::string>> names,
                                        std::shared_ptr<std::mutex> names_mutex) {
  return [=](raw_socket& connection) {
    tls_session session(context, connection.fd());
    if (!session.accept().empty()) return;
    {
      std::lock_guard lock(*names_mutex);
      names->push_back(session.server_name());
    }
    for (;;) {
      const std::string got = session.read(1);
      if (got.empty() || !session.write(got)) break;
    }
    session.close();
  };
}

/// The number of threads of this process.
inline std::size_t thread_count() {
  std::size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)entry;
    ++count;
  }
  return count;
}

/// A proxy serving a listener on 127.0.0.1.
struct running_proxy {
  std::unique_ptr<psych::host::egress_proxy> proxy;
  std::uint16_t port = 0;
};

inline running_proxy start_proxy(psych::host::egress_proxy_options options) {
  running_proxy out;
  unique_fd listener = loopback_listener(out.port);
  auto started = psych::host::egress_proxy::start(std::move(options), {listener.release()});
  REQUIRE_MESSAGE(started, (started ? "" : started.error().message()));
  out.proxy = std::move(started).value();
  return out;
}

inline std::vector<psych::host_pattern> patterns(std::initializer_list<std::string> texts) {
  std::vector<psych::host_pattern> out;
  for (const auto& text : texts) out.push_back(psych::parse_host_pattern(text).value());
  return out;
}

/// Waits (bounded) for the proxy's meters to satisfy `ready`; the last snapshot either way.
inline psych::host::egress_meters meters_when(const psych::host::egress_proxy& proxy,
                                              const std::function<bool(const psych::host::egress_meters&)>& ready) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  auto meters = proxy.meters();
  while (!ready(meters) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
    meters = proxy.meters();
  }
  return meters;
}

}  // namespace egress_test
