// The egress proxy's bounds (src/host/egress/egress_proxy.hpp): a head that never completes, a
// head too large, too many connections, the byte bound, idleness and lifetime, each ending only
// its own connection with a named reason in the meters; and stop() with connections open.
// Timings are generous upper bounds only: the machines are shared.
#include <boost/asio/steady_timer.hpp>
#include <doctest/doctest.h>

#include "fake_internet.hpp"
#include "hello_builder.hpp"

using namespace egress_test;
using psych::host::egress_meters;
using psych::host::egress_proxy_options;
using psych::host::proxy_error;

namespace {

using clock_type = std::chrono::steady_clock;

egress_proxy_options echo_world(const std::string& authority) {
  egress_proxy_options options;
  options.allowed = patterns({authority});
  options.resolve = fake_dns({{"echo.example.test", {"127.0.0.1"}}});
  options.treat_as_public = {boost::asio::ip::make_address("127.0.0.1")};
  return options;
}

std::unique_ptr<raw_socket> open_tunnel(std::uint16_t proxy_port, const std::string& authority) {
  auto client = std::make_unique<raw_socket>(proxy_port);
  REQUIRE(client->send("CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n"));
  REQUIRE(client->read_head() == "HTTP/1.1 200 Connection established\r\n\r\n");
  return client;
}

}  // namespace

TEST_CASE("a head that never completes is answered 408 at head_timeout, however it drips") {
  egress_proxy_options options;
  options.head_timeout = 500ms;
  auto proxy = start_proxy(std::move(options));
  SUBCASE("nothing at all") {
    raw_socket client(proxy.port);
    const auto start = clock_type::now();
    const std::string answer = client.read_to_end();
    CHECK(answer.starts_with("HTTP/1.1 408 "));
    CHECK(answer.find("no whole request head within 500 ms") != std::string::npos);
    CHECK(client.ended());
    CHECK(clock_type::now() - start < 5s);
  }
  SUBCASE("a byte at a time, each in time for a per-read timer") {
    raw_socket client(proxy.port);
    const auto start = clock_type::now();
    const std::string head = "GET http://a.example.test/ HTTP/1.1\r\nX-Long: ";
    std::string answer;
    for (std::size_t i = 0; clock_type::now() - start < 8s; ++i) {
      if (!client.send(std::string(1, i < head.size() ? head[i] : 'x'))) break;
      answer = client.read_to_end(100ms);
      if (!answer.empty() || client.ended()) break;
    }
    CHECK(answer.starts_with("HTTP/1.1 408 "));
    CHECK(clock_type::now() - start < 5s);
  }
  const auto meters = meters_when(*proxy.proxy, [](const egress_meters& m) { return m.connections_refused == 1; });
  REQUIRE(meters.latest_refusals.size() == 1);
  CHECK(meters.latest_refusals[0].error == proxy_error::http_request_error);
}

TEST_CASE("a head too large or of too many fields is refused with 431") {
  auto proxy = start_proxy({});
  SUBCASE("over 16 KiB") {
    raw_socket client(proxy.port);
    client.send("GET http://a.example.test/ HTTP/1.1\r\nX-Big: " + std::string(20 * 1024, 'b') + "\r\n\r\n");
    const std::string answer = client.read_to_end();
    CHECK(answer.starts_with("HTTP/1.1 431 "));
    CHECK(answer.find("a request head over 16384 bytes") != std::string::npos);
  }
  SUBCASE("an endless header line") {
    raw_socket client(proxy.port);
    std::thread writer([&] {
      for (int i = 0; i < 64 && client.send(std::string(4096, 'z')); ++i) {
      }
    });
    const std::string answer = client.read_head();
    writer.join();
    CHECK(answer.starts_with("HTTP/1.1 431 "));
  }
  SUBCASE("too many fields") {
    std::string head = "GET http://a.example.test/ HTTP/1.1\r\nHost: a.example.test\r\n";
    for (int i = 0; i < 150; ++i) head += "X-" + std::to_string(i) + ": v\r\n";
    raw_socket client(proxy.port);
    client.send(head + "\r\n");
    const std::string answer = client.read_to_end();
    CHECK(answer.starts_with("HTTP/1.1 431 "));
    CHECK(answer.find("more than 100 fields") != std::string::npos);
  }
}

TEST_CASE("beyond max_connections a connection is answered 503 at once; a freed place serves again") {
  egress_proxy_options options;
  options.max_connections = 2;
  options.head_timeout = 20s;
  auto proxy = start_proxy(std::move(options));
  auto first = std::make_unique<raw_socket>(proxy.port);
  raw_socket second(proxy.port);
  // Both are served (each waits for its head) before the third arrives.
  first->send("GET");
  second.send("GET");
  {
    raw_socket third(proxy.port);
    const std::string answer = third.read_to_end();
    CHECK(answer.starts_with("HTTP/1.1 503 "));
    CHECK(answer.find("error=connection_limit_reached") != std::string::npos);
    CHECK(answer.find("the proxy serves 2 connections at once already") != std::string::npos);
  }
  first.reset();
  const auto deadline = clock_type::now() + 10s;
  std::string answer;
  while (clock_type::now() < deadline) {
    raw_socket again(proxy.port);
    again.send("GET / HTTP/1.1\r\nHost: a.example.test\r\n\r\n");
    answer = again.read_to_end();
    if (!answer.starts_with("HTTP/1.1 503 ")) break;
    std::this_thread::sleep_for(50ms);
  }
  CHECK(answer.starts_with("HTTP/1.1 400 "));  // served: refused for its form, not for room
}

TEST_CASE("the byte bound ends a tunnel, counted as a cut") {
  loopback_server server(echo);
  const std::string authority = "echo.example.test:" + std::to_string(server.port());
  auto options = echo_world(authority);
  options.connection_bytes = 64 * 1024;
  auto proxy = start_proxy(std::move(options));
  auto client = open_tunnel(proxy.port, authority);
  std::thread writer([&] { client->send(std::string(1 << 20, 'b')); });
  const std::string back = client->read_to_end();
  writer.join();
  CHECK(client->ended());
  CHECK(back.size() <= 64 * 1024);
  const auto meters = meters_when(*proxy.proxy, [](const egress_meters& m) { return m.cut_bytes == 1; });
  CHECK(meters.cut_bytes == 1);
  CHECK(meters.bytes_sent + meters.bytes_received <= 64 * 1024);
  CHECK(meters.bytes_sent + meters.bytes_received > 0);
}

TEST_CASE("idleness and lifetime end a tunnel, each counted by name") {
  loopback_server server(echo);
  const std::string authority = "echo.example.test:" + std::to_string(server.port());
  auto options = echo_world(authority);
  bool idle = false;
  SUBCASE("no byte either way for idle_timeout") {
    idle = true;
    options.idle_timeout = 400ms;
  }
  SUBCASE("older than connection_lifetime, however busy") { options.connection_lifetime = 800ms; }
  auto proxy = start_proxy(std::move(options));
  auto client = open_tunnel(proxy.port, authority);
  const auto start = clock_type::now();
  // Silent for the idle bound; busy, a tick every 50 ms, for the lifetime.
  while (clock_type::now() - start < 8s && !client->ended()) {
    if (idle) {
      client->read_to_end();
    } else if (client->send("tick")) {
      client->read_bytes(4, 200ms);
      std::this_thread::sleep_for(50ms);
    }
  }
  CHECK(client->ended());
  CHECK(clock_type::now() - start < 5s);
  const auto meters =
      meters_when(*proxy.proxy, [](const egress_meters& m) { return m.cut_idle + m.cut_lifetime == 1; });
  CHECK(meters.cut_idle == (idle ? 1 : 0));
  CHECK(meters.cut_lifetime == (idle ? 0 : 1));
}

TEST_CASE("a ClientHello that does not arrive whole within head_timeout: the alert, then the end") {
  loopback_server server(echo);
  const std::string authority = "echo.example.test:" + std::to_string(server.port());
  auto options = echo_world(authority);
  options.head_timeout = 500ms;
  options.tls_ports = {server.port()};
  auto proxy = start_proxy(std::move(options));
  auto client = open_tunnel(proxy.port, authority);
  const std::string hello = client_hello("echo.example.test");
  REQUIRE(client->send(hello.substr(0, hello.size() / 2)));
  const auto start = clock_type::now();
  CHECK(client->read_to_end() == std::string("\x15\x03\x03\x00\x02\x02\x31", 7));
  CHECK(clock_type::now() - start < 5s);
  const auto meters = meters_when(*proxy.proxy, [](const egress_meters& m) { return m.connections_refused == 1; });
  REQUIRE(meters.latest_refusals.size() == 1);
  CHECK(meters.latest_refusals[0].error == proxy_error::tls_protocol_error);
  CHECK(meters.latest_refusals[0].detail == "no whole ClientHello within 500 ms");
  CHECK(meters.connections_allowed == 0);
}

TEST_CASE("the meters keep the latest 32 refusals, oldest first, and count every one") {
  auto proxy = start_proxy({});
  for (int i = 0; i < 40; ++i) {
    raw_socket client(proxy.port);
    client.send("CONNECT host" + std::to_string(i) + ".example.test:443 HTTP/1.1\r\n\r\n");
    client.read_to_end();
  }
  const auto meters = meters_when(*proxy.proxy, [](const egress_meters& m) { return m.connections_refused == 40; });
  CHECK(meters.connections_refused == 40);
  REQUIRE(meters.latest_refusals.size() == egress_meters::kept_refusals);
  CHECK(meters.latest_refusals.front().host == "host8.example.test");
  CHECK(meters.latest_refusals.back().host == "host39.example.test");
}

TEST_CASE("stop() with connections open returns promptly and leaves no thread") {
  // A destination that never accepts: the kernel completes the connection, and no server thread of
  // the test's own comes or goes while threads are counted.
  std::uint16_t port = 0;
  const auto destination = loopback_listener(port);
  const std::string authority = "echo.example.test:" + std::to_string(port);
  const auto threads_before = thread_count();
  auto options = echo_world(authority);
  options.head_timeout = 60s;
  auto proxy = start_proxy(std::move(options));
  auto tunnel = open_tunnel(proxy.port, authority);
  REQUIRE(tunnel->send("x"));
  raw_socket waiting_for_head(proxy.port);
  waiting_for_head.send("GET http://a.example");
  raw_socket silent(proxy.port);
  CHECK(meters_when(*proxy.proxy, [](const egress_meters& m) { return m.bytes_sent == 1; }).connections_allowed == 1);
  const auto start = clock_type::now();
  proxy.proxy->stop();
  CHECK(clock_type::now() - start < 2s);
  CHECK(thread_count() == threads_before);
  tunnel->read_to_end(2s);
  CHECK(tunnel->ended());
  waiting_for_head.read_to_end(2s);
  CHECK(waiting_for_head.ended());
  silent.read_to_end(2s);
  CHECK(silent.ended());
  CHECK(proxy.proxy->meters().connections_allowed == 1);
  proxy.proxy->stop();  // again: nothing to do
}

TEST_CASE("stop() while a name is being resolved does not wait for the answer") {
  const auto threads_before = thread_count();
  egress_proxy_options options;
  options.allowed = patterns({"slow.example.test"});
  // A resolver whose answer would come in a minute, from a handler on the proxy's own loop.
  options.resolve = [](const boost::asio::any_io_executor& executor, const std::string&,
                       std::function<void(psych::host::egress_answer)> done) {
    auto later = std::make_shared<boost::asio::steady_timer>(executor, 60s);
    later->async_wait([later, done = std::move(done)](const boost::system::error_code&) {
      done(std::vector{boost::asio::ip::make_address("192.0.2.1")});
    });
  };
  auto proxy = start_proxy(std::move(options));
  raw_socket client(proxy.port);
  REQUIRE(client.send("CONNECT slow.example.test:443 HTTP/1.1\r\n\r\n"));
  std::this_thread::sleep_for(200ms);
  const auto start = clock_type::now();
  proxy.proxy->stop();
  CHECK(clock_type::now() - start < 5s);
  CHECK(thread_count() == threads_before);
  client.read_to_end(2s);
  CHECK(client.ended());
  CHECK(proxy.proxy->meters().connections_refused == 0);  // stopping is not a refusal
}

TEST_CASE("start refuses what is not a listening TCP socket, closing it") {
  const int datagram = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  auto refused = psych::host::egress_proxy::start({}, {datagram});
  REQUIRE_FALSE(refused);
  CHECK(refused.error().detail.find("is not a listening TCP socket") != std::string::npos);
  CHECK(::fcntl(datagram, F_GETFD) == -1);  // closed: it was the proxy's to close
  const int unbound = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK_FALSE(psych::host::egress_proxy::start({}, {unbound}));
  CHECK_FALSE(psych::host::egress_proxy::start({}, {}));
}
