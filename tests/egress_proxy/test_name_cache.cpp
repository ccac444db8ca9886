// The proxy's reuse of a name's answer (src/host/egress/name_cache.hpp): kept for its time and no
// longer, bounded in names, and never trusted past a failure: an answer none of whose addresses
// takes a connection is dropped, and a connection that used it asks the resolver again at once.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <doctest/doctest.h>

#include "egress/name_cache.hpp"
#include "fake_internet.hpp"

using namespace egress_test;
using psych::host::egress_meters;
using psych::host::egress_proxy_options;
using psych::host::proxy_error;
using psych::host::egress::name_cache;
namespace ip = boost::asio::ip;

namespace {

using clock = name_cache::clock;

std::vector<ip::address> address_list(std::initializer_list<const char*> texts) {
  std::vector<ip::address> out;
  for (const char* text : texts) out.push_back(ip::make_address(text));
  return out;
}

/// A resolver whose answer the test changes between connections, and which counts its questions.
struct changing_dns {
  struct state {
    std::mutex mutex;
    std::vector<std::string> answer;  // empty: the name does not resolve
    int asked = 0;
  };
  std::shared_ptr<state> s = std::make_shared<state>();

  void answer(std::vector<std::string> addresses) {
    std::lock_guard lock(s->mutex);
    s->answer = std::move(addresses);
  }
  [[nodiscard]] int asked() const {
    std::lock_guard lock(s->mutex);
    return s->asked;
  }
  [[nodiscard]] psych::host::egress_resolver resolver() const {
    return [s = s](const boost::asio::any_io_executor&, const std::string&,
                   std::function<void(psych::host::egress_answer)> done) {
      std::vector<ip::address> found;
      {
        std::lock_guard lock(s->mutex);
        ++s->asked;
        for (const auto& text : s->answer) found.push_back(ip::make_address(text));
      }
      if (found.empty()) return done(psych::fail_with(psych::error_kind::invalid_argument, "no such name (fake DNS)"));
      done(std::move(found));
    };
  }
};

/// A socket listening on `address`:`port` (0: a port of the system's choosing, written back). A
/// listening socket completes a connection's handshake by itself: enough for the proxy's 200.
unique_fd listener_at(const char* address, std::uint16_t& port) {
  unique_fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(fd.valid());
  sockaddr_in where{};
  where.sin_family = AF_INET;
  where.sin_port = htons(port);
  REQUIRE(::inet_pton(AF_INET, address, &where.sin_addr) == 1);
  socklen_t size = sizeof where;
  REQUIRE_MESSAGE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&where), size) == 0, address, ":", port);
  REQUIRE(::listen(fd.get(), 16) == 0);
  REQUIRE(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&where), &size) == 0);
  port = ntohs(where.sin_port);
  return fd;
}

egress_proxy_options cached_world(const changing_dns& dns, std::uint16_t port) {
  egress_proxy_options options;
  options.allowed = patterns({"api.example.test:" + std::to_string(port)});
  options.resolve = dns.resolver();
  options.treat_as_public = address_list({"127.0.0.1", "127.0.0.2"});
  options.tls_ports = {};  // the listeners say nothing: the tunnel's bytes need not be TLS
  return options;
}

/// The first line of the proxy's answer to a CONNECT on a fresh connection.
std::string connect_status(std::uint16_t proxy_port, std::uint16_t port) {
  raw_socket client(proxy_port);
  const std::string authority = "api.example.test:" + std::to_string(port);
  REQUIRE(client.send("CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n"));
  const std::string head = client.read_head();
  return head.substr(0, head.find("\r\n"));
}

constexpr std::string_view established_line = "HTTP/1.1 200 Connection established";

}  // namespace

TEST_CASE("name cache: an answer is found until its time, then not; forget drops it") {
  name_cache cache;
  const auto now = clock::now();
  cache.keep("api.example.test", address_list({"192.0.2.1", "2001:db8::1"}), now + 30s, now);
  CHECK(cache.find("api.example.test", now + 29s) == address_list({"192.0.2.1", "2001:db8::1"}));
  CHECK_FALSE(cache.find("api.example.test", now + 30s));
  CHECK_FALSE(cache.find("other.example.test", now));
  cache.keep("api.example.test", address_list({"192.0.2.2"}), now + 60s, now);  // a newer answer replaces it
  CHECK(cache.find("api.example.test", now + 45s) == address_list({"192.0.2.2"}));
  cache.forget("api.example.test");
  CHECK_FALSE(cache.find("api.example.test", now));
  // Nothing is kept of an empty answer, or of one already past its time.
  cache.keep("empty.example.test", {}, now + 30s, now);
  cache.keep("late.example.test", address_list({"192.0.2.3"}), now, now);
  CHECK(cache.size() == 0);
}

TEST_CASE("name cache: at most most_names names; a full cache drops the expired, then the answer nearest its end") {
  name_cache cache;
  const auto now = clock::now();
  for (std::size_t i = 0; i < name_cache::most_names; ++i)
    cache.keep(fmt::format("n{}.example.test", i), address_list({"192.0.2.1"}),
               now + std::chrono::seconds(10 + static_cast<long>(i)), now);
  CHECK(cache.size() == name_cache::most_names);
  // Replacing a name already kept takes no room.
  cache.keep("n5.example.test", address_list({"192.0.2.5"}), now + 500s, now);
  CHECK(cache.size() == name_cache::most_names);
  // Full, none expired: the one nearest its end (n0, at 10 s) goes.
  cache.keep("new.example.test", address_list({"192.0.2.9"}), now + 100s, now);
  CHECK(cache.size() == name_cache::most_names);
  CHECK_FALSE(cache.find("n0.example.test", now));
  CHECK(cache.find("n1.example.test", now));
  CHECK(cache.find("new.example.test", now));
  // Later, past the ends of n1..n20 (11..30 s) but n5's (500 s now): those 19 go, nothing else, and
  // the newcomer takes one of their places.
  const auto later = now + 30500ms;
  cache.keep("newer.example.test", address_list({"192.0.2.10"}), later + 100s, later);
  CHECK(cache.size() == name_cache::most_names - 19 + 1);
  CHECK_FALSE(cache.find("n20.example.test", later));
  CHECK(cache.find("n21.example.test", later));
  CHECK(cache.find("n5.example.test", later));
}

TEST_CASE("proxy: a name's answer is reused by the next connection, so the resolver is asked once") {
  std::uint16_t port = 0;
  const auto server = listener_at("127.0.0.1", port);
  changing_dns dns;
  dns.answer({"127.0.0.1"});
  auto proxy = start_proxy(cached_world(dns, port));
  CHECK(connect_status(proxy.port, port) == established_line);
  CHECK(connect_status(proxy.port, port) == established_line);
  CHECK(connect_status(proxy.port, port) == established_line);
  CHECK(dns.asked() == 1);
  const auto meters = meters_when(*proxy.proxy, [](const egress_meters& m) { return m.connections_allowed == 3; });
  CHECK(meters.connections_allowed == 3);
}

TEST_CASE("proxy: with name_cache_for zero every connection has its name resolved") {
  std::uint16_t port = 0;
  const auto server = listener_at("127.0.0.1", port);
  changing_dns dns;
  dns.answer({"127.0.0.1"});
  auto options = cached_world(dns, port);
  options.name_cache_for = 0ms;
  auto proxy = start_proxy(std::move(options));
  CHECK(connect_status(proxy.port, port) == established_line);
  CHECK(connect_status(proxy.port, port) == established_line);
  CHECK(dns.asked() == 2);
}

TEST_CASE("proxy: a reused answer whose address no longer answers is asked anew at once, and the new address reached") {
  std::uint16_t port = 0;
  auto first_home = listener_at("127.0.0.1", port);
  std::uint16_t same_port = port;
  changing_dns dns;
  dns.answer({"127.0.0.1"});
  auto proxy = start_proxy(cached_world(dns, port));
  REQUIRE(connect_status(proxy.port, port) == established_line);
  REQUIRE(dns.asked() == 1);

  // The name moves: its old address refuses, the new one listens on the same port.
  first_home.reset();
  const auto second_home = listener_at("127.0.0.2", same_port);
  REQUIRE(same_port == port);
  dns.answer({"127.0.0.2"});
  CHECK(connect_status(proxy.port, port) == established_line);
  CHECK(dns.asked() == 2);
  CHECK(connect_status(proxy.port, port) == established_line);  // the new answer is the one kept now
  CHECK(dns.asked() == 2);
}

TEST_CASE("proxy: an answer none of whose addresses answers is not kept; the same answer again is not tried twice") {
  const std::uint16_t port = closed_port();
  changing_dns dns;
  dns.answer({"127.0.0.1"});
  auto proxy = start_proxy(cached_world(dns, port));
  CHECK(connect_status(proxy.port, port).starts_with("HTTP/1.1 502 "));
  CHECK(dns.asked() == 1);
  CHECK(connect_status(proxy.port, port).starts_with("HTTP/1.1 502 "));
  CHECK(dns.asked() == 2);
  const auto meters = meters_when(*proxy.proxy, [](const egress_meters& m) { return m.connections_refused == 2; });
  REQUIRE(meters.latest_refusals.size() == 2);
  for (const auto& refusal : meters.latest_refusals) CHECK(refusal.error == proxy_error::connection_refused);
}

TEST_CASE("proxy: a failed resolution is not kept, and a reused answer is vetted on every use") {
  std::uint16_t port = 0;
  const auto server = listener_at("127.0.0.1", port);
  changing_dns dns;  // no answer yet
  auto options = cached_world(dns, port);
  options.treat_as_public = {};  // 127.0.0.1 is loopback again: never connected to on a name's behalf
  auto proxy = start_proxy(std::move(options));
  CHECK(connect_status(proxy.port, port).starts_with("HTTP/1.1 502 "));  // dns_error
  dns.answer({"127.0.0.1"});
  CHECK(connect_status(proxy.port, port).starts_with("HTTP/1.1 403 "));  // destination_ip_prohibited
  CHECK(connect_status(proxy.port, port).starts_with("HTTP/1.1 403 "));  // the kept answer, refused again
  CHECK(dns.asked() == 2);
  const auto meters = meters_when(*proxy.proxy, [](const egress_meters& m) { return m.connections_refused == 3; });
  REQUIRE(meters.latest_refusals.size() == 3);
  CHECK(meters.latest_refusals[0].error == proxy_error::dns_error);
  CHECK(meters.latest_refusals[1].error == proxy_error::destination_ip_prohibited);
  CHECK(meters.latest_refusals[2].error == proxy_error::destination_ip_prohibited);
}
