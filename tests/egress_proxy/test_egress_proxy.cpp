// The egress proxy (src/host/egress/egress_proxy.hpp) between a raw client and a fake internet on
// loopback: what it admits (CONNECT to a listed name with a real TLS handshake, a plain request in
// absolute-form), what it refuses and how each refusal looks, and what it never reaches.
#include <doctest/doctest.h>

#include "fake_internet.hpp"
#include "hello_builder.hpp"

using namespace egress_test;
using psych::host::egress_meters;
using psych::host::egress_proxy_options;
using psych::host::proxy_error;

namespace {

constexpr std::string_view established = "HTTP/1.1 200 Connection established\r\n\r\n";
const std::string plain_answer = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
const std::string access_denied_alert("\x15\x03\x03\x00\x02\x02\x31", 7);

std::string port_text(std::uint16_t port) { return std::to_string(port); }

/// The fake internet's usual options: names on loopback, loopback vetted as public.
egress_proxy_options world(std::vector<psych::host_pattern> allowed,
                           std::map<std::string, std::vector<std::string>> names = {}) {
  egress_proxy_options options;
  options.allowed = std::move(allowed);
  options.resolve = fake_dns(std::move(names));
  options.treat_as_public = {boost::asio::ip::make_address("127.0.0.1")};
  return options;
}

std::string connect_head(const std::string& authority) {
  return "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n";
}

/// The answer to one request on a fresh connection, read to the proxy's close.
std::string ask(std::uint16_t proxy_port, const std::string& request) {
  raw_socket client(proxy_port);
  REQUIRE(client.send(request));
  std::string answer = client.read_to_end();
  CHECK(client.ended());
  return answer;
}

/// A refusal as the proxy writes it: status, Proxy-Status with the error type, the text body.
void check_refusal(const std::string& answer, unsigned status, proxy_error error, std::string_view why) {
  CAPTURE(answer);
  CHECK(answer.starts_with("HTTP/1.1 " + std::to_string(status) + " "));
  CHECK(answer.find("\r\nProxy-Status: psych; error=" + std::string(psych::name_of(error)) + "; details=\"") !=
        std::string::npos);
  CHECK(answer.find("\r\nConnection: close\r\n") != std::string::npos);
  const auto body = answer.find("\r\n\r\npsych egress: refused: ");
  REQUIRE(body != std::string::npos);
  CHECK(answer.find(why, body) != std::string::npos);
}

/// A server answering one plain request: its head and body (by Content-Length, or to the last
/// chunk) are kept, then `answer` is written and the connection closed.
struct http_server {
  std::shared_ptr<std::vector<std::string>> requests = std::make_shared<std::vector<std::string>>();
  std::shared_ptr<std::mutex> mutex = std::make_shared<std::mutex>();
  loopback_server server;

  explicit http_server(std::string answer = plain_answer)
      : server([requests = requests, mutex = mutex, answer](raw_socket& connection) {
          std::string got = connection.read_head();
          if (got.find("Transfer-Encoding: chunked") != std::string::npos) {
            if (!got.ends_with("0\r\n\r\n"))
              got += connection.read_until(
                  [&got](const std::string& more) { return (got + more).ends_with("0\r\n\r\n"); });
          } else if (const auto at = got.find("Content-Length: "); at != std::string::npos) {
            const std::size_t length = std::stoul(got.substr(at + 16));
            const std::size_t have = got.size() - got.find("\r\n\r\n") - 4;
            if (have < length) got += connection.read_bytes(length - have);
          }
          // Whatever else comes on this connection, within a moment: a second request must not.
          got += connection.read_to_end(200ms);
          {
            std::lock_guard lock(*mutex);
            requests->push_back(got);
          }
          connection.send(answer);
          connection.shut_sending();
        }) {}

  [[nodiscard]] std::vector<std::string> received() const {
    std::lock_guard lock(*mutex);
    return *requests;
  }
};

}  // namespace

TEST_CASE("CONNECT to a listed name: a real TLS handshake through the tunnel, its server name unchanged") {
  tls_identity tls;
  auto names = std::make_shared<std::vector<std::string>>();
  auto names_mutex = std::make_shared<std::mutex>();
  loopback_server server(tls_echo(tls.server.get(), names, names_mutex));
  const std::string authority = "api.example.test:" + port_text(server.port());
  auto options = world(patterns({authority}), {{"api.example.test", {"127.0.0.1"}}});
  options.tls_ports = {server.port()};
  auto proxy = start_proxy(std::move(options));

  raw_socket client(proxy.port);
  REQUIRE(client.send(connect_head(authority)));
  CHECK(client.read_head() == established);
  tls_session session(tls.client.get(), client.fd());
  REQUIRE(session.connect("API.Example.test.") == "");
  const std::string message = "a request the proxy cannot read";
  REQUIRE(session.write(message));
  CHECK(session.read(message.size()) == message);
  session.close();
  {
    std::lock_guard lock(*names_mutex);
    CHECK(*names == std::vector<std::string>{"API.Example.test."});
  }
  const auto meters = meters_when(*proxy.proxy, [](const egress_meters& m) { return m.connections_allowed == 1; });
  CHECK(meters.connections_allowed == 1);
  CHECK(meters.connections_refused == 0);
  CHECK(meters.bytes_sent > message.size());
  CHECK(meters.bytes_received > message.size());
}

TEST_CASE("CONNECT to a name the allowlist does not name: 403 http_request_denied, nothing resolved") {
  bool resolved = false;
  egress_proxy_options options = world(patterns({"api.example.test"}));
  options.resolve = [&resolved](const boost::asio::any_io_executor&, const std::string&,
                                std::function<void(psych::host::egress_answer)>) { resolved = true; };
  auto proxy = start_proxy(std::move(options));
  check_refusal(ask(proxy.port, connect_head("evil.example.test:443")), 403, proxy_error::http_request_denied,
                "evil.example.test:443 is not on the allowlist");
  check_refusal(ask(proxy.port, connect_head("api.example.test:22")), 403, proxy_error::http_request_denied,
                "api.example.test:22 is not on the allowlist");
  CHECK_FALSE(resolved);
  const auto meters = meters_when(*proxy.proxy, [](const egress_meters& m) { return m.connections_refused == 2; });
  REQUIRE(meters.latest_refusals.size() == 2);
  CHECK(meters.latest_refusals[0].host == "evil.example.test");
  CHECK(meters.latest_refusals[0].port == 443);
  CHECK(meters.latest_refusals[0].error == proxy_error::http_request_denied);
  CHECK(meters.latest_refusals[1].port == 22);
  CHECK(meters.connections_allowed == 0);
}

TEST_CASE("an address the allowlist does not name, IPv6 or the proxy's own, is refused") {
  auto proxy = start_proxy(world(patterns({"api.example.test"})));
  check_refusal(ask(proxy.port, connect_head("[2001:db8::1]:443")), 403, proxy_error::http_request_denied,
                "[2001:db8::1]:443 is not on the allowlist");
  check_refusal(ask(proxy.port, connect_head("127.0.0.1:" + port_text(proxy.port))), 403,
                proxy_error::http_request_denied, "is not on the allowlist");
  const std::string mapped = psych::canonicalize_host("[::ffff:127.0.0.1]")->host;  // its one spelling
  check_refusal(ask(proxy.port, connect_head("[::ffff:127.0.0.1]:443")), 403, proxy_error::http_request_denied,
                "[" + mapped + "]:443 is not on the allowlist");
}

TEST_CASE("the proxy's own listener is never a destination, even listed by its literal") {
  std::uint16_t port = 0;
  auto listener = loopback_listener(port);
  auto options = world(patterns({"127.0.0.1:" + port_text(port)}));
  auto started = psych::host::egress_proxy::start(std::move(options), {listener.release()});
  REQUIRE(started);
  check_refusal(ask(port, connect_head("127.0.0.1:" + port_text(port))), 403, proxy_error::destination_ip_prohibited,
                "is the proxy's own listener");
}

TEST_CASE("an IP literal a pattern names exactly is reached whatever its class") {
  loopback_server server(echo);
  const std::string authority = "127.0.0.1:" + port_text(server.port());
  egress_proxy_options options;  // no fake internet: 127.0.0.1 is reached only because a pattern names it
  options.allowed = patterns({authority});
  auto proxy = start_proxy(std::move(options));
  raw_socket client(proxy.port);
  REQUIRE(client.send(connect_head(authority)));
  CHECK(client.read_head() == established);
  const std::string bytes = "plain bytes on a port that is not a TLS one";
  REQUIRE(client.send(bytes));
  CHECK(client.read_bytes(bytes.size()) == bytes);
}

TEST_CASE("a listed name that resolves only to prohibited addresses: 403 destination_ip_prohibited") {
  loopback_server server(echo);
  const auto port = port_text(server.port());
  egress_proxy_options options;  // no fake internet: loopback is what a rebinding DNS would hand out
  options.allowed = patterns({"*.example.test:" + port});
  options.resolve = fake_dns({{"rebound.example.test", {"127.0.0.1"}},
                              {"private.example.test", {"10.0.0.1"}},
                              {"metadata.example.test", {"169.254.169.254"}},
                              {"ula.example.test", {"fd00::1"}},
                              {"mapped.example.test", {"::ffff:127.0.0.1"}},
                              {"several.example.test", {"192.168.0.10", "::1", "0.0.0.0"}}});
  auto proxy = start_proxy(std::move(options));
  const std::vector<std::pair<std::string, std::string>> cases{
      {"rebound", "127.0.0.1 (loopback)"},
      {"private", "10.0.0.1 (private)"},
      {"metadata", "169.254.169.254 (link-local)"},
      {"ula", "fd00::1 (private)"},
      {"mapped", "::ffff:127.0.0.1 (loopback)"},
      {"several", "192.168.0.10 (private), ::1 (loopback), 0.0.0.0 (unspecified)"}};
  for (const auto& [name, classes] : cases) {
    CAPTURE(name);
    check_refusal(ask(proxy.port, connect_head(name + ".example.test:" + port)), 403,
                  proxy_error::destination_ip_prohibited, "resolves only to addresses never connected to");
    check_refusal(ask(proxy.port, connect_head(name + ".example.test:" + port)), 403,
                  proxy_error::destination_ip_prohibited, classes);
  }
  CHECK(server.accepted() == 0);
}

TEST_CASE("a name whose answer mixes prohibited and permitted addresses reaches only the permitted") {
  loopback_server server(echo);
  const std::string authority = "mixed.example.test:" + port_text(server.port());
  auto proxy =
      start_proxy(world(patterns({authority}), {{"mixed.example.test", {"10.0.0.1", "169.254.169.254", "127.0.0.1"}}}));
  raw_socket client(proxy.port);
  REQUIRE(client.send(connect_head(authority)));
  CHECK(client.read_head() == established);
  REQUIRE(client.send("ping"));
  CHECK(client.read_bytes(4) == "ping");
  CHECK(server.accepted() == 1);
}

TEST_CASE("the system resolver's answer is vetted too: localhost is loopback") {
  egress_proxy_options options;
  options.allowed = patterns({"localhost"});
  auto proxy = start_proxy(std::move(options));
  check_refusal(ask(proxy.port, connect_head("localhost:443")), 403, proxy_error::destination_ip_prohibited,
                "(loopback)");
}

TEST_CASE("resolving and connecting fail as RFC 9209 names them") {
  const auto refused_port = closed_port();
  SUBCASE("no such name: 502 dns_error") {
    auto proxy = start_proxy(world(patterns({"missing.example.test"})));
    check_refusal(ask(proxy.port, connect_head("missing.example.test:443")), 502, proxy_error::dns_error,
                  "resolving missing.example.test: no such name");
  }
  SUBCASE("a resolver that never answers: 504 dns_timeout at connect_timeout") {
    auto options = world(patterns({"slow.example.test"}));
    options.resolve = silent_dns();
    options.connect_timeout = 300ms;
    auto proxy = start_proxy(std::move(options));
    const auto start = std::chrono::steady_clock::now();
    check_refusal(ask(proxy.port, connect_head("slow.example.test:443")), 504, proxy_error::dns_timeout,
                  "resolving slow.example.test took longer than 300 ms");
    CHECK(std::chrono::steady_clock::now() - start < 5s);
  }
  SUBCASE("nothing listens: 502 connection_refused") {
    const std::string authority = "closed.example.test:" + port_text(refused_port);
    auto proxy = start_proxy(world(patterns({authority}), {{"closed.example.test", {"127.0.0.1"}}}));
    check_refusal(ask(proxy.port, connect_head(authority)), 502, proxy_error::connection_refused,
                  "refused the connection");
  }
}

TEST_CASE("a plain request in absolute-form is sent on in origin-form, once, with Connection: close") {
  http_server web;
  const std::string authority = "web.example.test:" + port_text(web.server.port());
  auto proxy = start_proxy(world(patterns({authority}), {{"web.example.test", {"127.0.0.1"}}}));
  SUBCASE("a GET, its proxy fields kept from the destination") {
    const std::string answer =
        ask(proxy.port, "GET http://" + authority +
                            "/path?q=1 HTTP/1.1\r\nHost: WEB.example.test:" + port_text(web.server.port()) +
                            "\r\nProxy-Authorization: Basic c2VjcmV0\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n");
    CHECK(answer == plain_answer);
    const auto received = web.received();
    REQUIRE(received.size() == 1);
    CHECK(received[0].starts_with("GET /path?q=1 HTTP/1.1\r\nHost: WEB.example.test:"));
    CHECK(received[0].find("\r\nAccept: */*\r\n") != std::string::npos);
    CHECK(received[0].ends_with("\r\nConnection: close\r\n\r\n"));
    CHECK(received[0].find("Proxy-Authorization") == std::string::npos);
    CHECK(received[0].find("keep-alive") == std::string::npos);
  }
  SUBCASE("a body by Content-Length, and a second request smuggled after it, which nothing sends on") {
    const std::string smuggled = "GET http://evil.example.test/ HTTP/1.1\r\nHost: evil.example.test\r\n\r\n";
    const std::string answer = ask(proxy.port, "POST http://" + authority + "/submit HTTP/1.1\r\nHost: " + authority +
                                                   "\r\nContent-Length: 5\r\n\r\nhello" + smuggled);
    CHECK(answer.starts_with("HTTP/1.1 200 OK"));
    CHECK(answer.find("HTTP/1.1", 1) == std::string::npos);  // one answer, then the end
    const auto received = web.received();
    REQUIRE(received.size() == 1);
    CHECK(received[0].ends_with("\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"));
    CHECK(received[0].find("evil") == std::string::npos);
  }
  SUBCASE("a chunked body, framed anew without its extensions and trailers") {
    const std::string answer =
        ask(proxy.port,
            "POST http://" + authority + "/ HTTP/1.1\r\nHost: " + authority +
                "\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n");
    CHECK(answer.starts_with("HTTP/1.1 200 OK"));
    const auto received = web.received();
    REQUIRE(received.size() == 1);
    const std::string body = received[0].substr(received[0].find("\r\n\r\n") + 4);
    CHECK(received[0].find("\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n") != std::string::npos);
    CHECK(body.ends_with("0\r\n\r\n"));
    CHECK(body.find("ext") == std::string::npos);
    CHECK(body.find("X-Trailer") == std::string::npos);
    CHECK((body == "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n" || body == "b\r\nhello world\r\n0\r\n\r\n"));
  }
  const auto meters = meters_when(*proxy.proxy, [](const egress_meters& m) { return m.connections_allowed == 1; });
  CHECK(meters.connections_allowed == 1);
  CHECK(meters.bytes_received == plain_answer.size());
}

TEST_CASE("a plain request whose Host header is not its URL's host is refused before it is sent") {
  http_server web;
  const std::string authority = "web.example.test:" + port_text(web.server.port());
  auto proxy = start_proxy(world(patterns({authority, "other.example.test"}), {{"web.example.test", {"127.0.0.1"}}}));
  check_refusal(ask(proxy.port, "GET http://" + authority + "/ HTTP/1.1\r\nHost: other.example.test\r\n\r\n"), 403,
                proxy_error::http_request_denied, "the Host header names other.example.test, the URL " + authority);
  check_refusal(ask(proxy.port, "GET http://" + authority + "/ HTTP/1.1\r\n\r\n"), 400, proxy_error::http_request_error,
                "exactly one Host");
  check_refusal(ask(proxy.port, "GET / HTTP/1.1\r\nHost: " + authority + "\r\n\r\n"), 400,
                proxy_error::http_request_error, "origin-form");
  check_refusal(ask(proxy.port, "GET https://" + authority + "/ HTTP/1.1\r\nHost: " + authority + "\r\n\r\n"), 400,
                proxy_error::http_request_error, "by CONNECT");
  check_refusal(ask(proxy.port, "\x16\x03\x01\x02\x00garbage that is not HTTP\r\n\r\n"), 400,
                proxy_error::http_request_error, "not an HTTP/1.x request");
  check_refusal(ask(proxy.port, "GET http://" + authority + "/ HTTP/2.0\r\nHost: " + authority + "\r\n\r\n"), 400,
                proxy_error::http_request_error, "not an HTTP/1.x request: bad version");
  CHECK(web.server.accepted() == 0);
}

TEST_CASE("a TLS server name other than the CONNECT's host: the access_denied alert, then the end") {
  tls_identity tls;
  auto names = std::make_shared<std::vector<std::string>>();
  auto names_mutex = std::make_shared<std::mutex>();
  loopback_server server(tls_echo(tls.server.get(), names, names_mutex));
  const std::string port = port_text(server.port());
  auto options = world(patterns({"api.example.test:" + port, "127.0.0.1:" + port}),
                       {{"api.example.test", {"127.0.0.1"}}, {"other.example.test", {"127.0.0.1"}}});
  options.tls_ports = {server.port()};
  auto proxy = start_proxy(std::move(options));
  const auto tunnel = [&](const std::string& authority) {
    auto client = std::make_unique<raw_socket>(proxy.port);
    REQUIRE(client->send(connect_head(authority)));
    REQUIRE(client->read_head() == established);
    return client;
  };
  SUBCASE("another name, by bytes") {
    auto client = tunnel("api.example.test:" + port);
    REQUIRE(client->send(client_hello("other.example.test")));
    CHECK(client->read_to_end() == access_denied_alert);
    CHECK(client->ended());
    const auto meters = meters_when(*proxy.proxy, [](const egress_meters& m) { return m.connections_refused == 1; });
    REQUIRE(meters.latest_refusals.size() == 1);
    CHECK(meters.latest_refusals[0].error == proxy_error::http_request_denied);
    CHECK(meters.latest_refusals[0].detail ==
          "the TLS server name other.example.test is not the CONNECT's host api.example.test");
  }
  SUBCASE("another name, by a real TLS client") {
    auto client = tunnel("api.example.test:" + port);
    tls_session session(tls.client.get(), client->fd());
    CHECK(session.connect("other.example.test").find("access denied") != std::string::npos);
  }
  SUBCASE("no server name, to a name") {
    auto client = tunnel("api.example.test:" + port);
    tls_session session(tls.client.get(), client->fd());
    CHECK(session.connect("").find("access denied") != std::string::npos);
    const auto meters = meters_when(*proxy.proxy, [](const egress_meters& m) { return m.connections_refused == 1; });
    REQUIRE(meters.latest_refusals.size() == 1);
    CHECK(meters.latest_refusals[0].detail.find("without a server name") != std::string::npos);
  }
  SUBCASE("a server name, to an address") {
    auto client = tunnel("127.0.0.1:" + port);
    REQUIRE(client->send(client_hello("api.example.test")));
    CHECK(client->read_to_end() == access_denied_alert);
  }
  SUBCASE("no server name, to an address, as TLS clients reach addresses") {
    auto client = tunnel("127.0.0.1:" + port);
    tls_session session(tls.client.get(), client->fd());
    REQUIRE(session.connect("") == "");
    REQUIRE(session.write("x"));
    CHECK(session.read(1) == "x");
  }
  SUBCASE("a ClientHello split over records and writes is joined and passes") {
    auto client = tunnel("api.example.test:" + port);
    const std::string split = in_records(hello_message({.server_name = "api.example.test"}), 40);
    for (std::size_t at = 0; at < split.size(); at += 37) {
      REQUIRE(client->send(split.substr(at, 37)));
      std::this_thread::sleep_for(2ms);
    }
    // The hello reached the server whole (it is not a real one, so the server's handshake fails).
    const auto meters = meters_when(*proxy.proxy, [&](const egress_meters& m) { return m.bytes_sent == split.size(); });
    CHECK(meters.connections_allowed == 1);
    CHECK(meters.connections_refused == 0);
    CHECK(meters.bytes_sent == split.size());
  }
  SUBCASE("a ClientHello whose lengths lie") {
    auto client = tunnel("api.example.test:" + port);
    std::string lying = client_hello("api.example.test");
    lying[5 + 4 + 2 + 32] = '\x7f';  // the session id's length, past the end
    REQUIRE(client->send(lying));
    CHECK(client->read_to_end() == access_denied_alert);
    const auto meters = meters_when(*proxy.proxy, [](const egress_meters& m) { return m.connections_refused == 1; });
    REQUIRE(meters.latest_refusals.size() == 1);
    CHECK(meters.latest_refusals[0].error == proxy_error::tls_protocol_error);
  }
  SUBCASE("bytes that are not TLS to a TLS port: closed without a word") {
    auto client = tunnel("api.example.test:" + port);
    REQUIRE(client->send("GET / HTTP/1.1\r\nHost: api.example.test\r\n\r\n"));
    CHECK(client->read_to_end().empty());
    CHECK(client->ended());
    const auto meters = meters_when(*proxy.proxy, [](const egress_meters& m) { return m.connections_refused == 1; });
    REQUIRE(meters.latest_refusals.size() == 1);
    CHECK(meters.latest_refusals[0].error == proxy_error::tls_protocol_error);
    CHECK(meters.latest_refusals[0].detail == "bytes that are not TLS, to port " + port);
  }
  std::lock_guard lock(*names_mutex);
  for (const auto& name : *names) CHECK(name != "other.example.test");
}

TEST_CASE("on a port that is not a TLS one, bytes that are not TLS pass, and a server may speak first") {
  loopback_server greeter([](raw_socket& connection) {
    connection.send("220 ready\r\n");
    echo(connection);
  });
  const std::string authority = "mail.example.test:" + port_text(greeter.port());
  auto proxy = start_proxy(world(patterns({authority}), {{"mail.example.test", {"127.0.0.1"}}}));
  raw_socket client(proxy.port);
  REQUIRE(client.send(connect_head(authority)));
  // The greeting may come in the same read as the 200.
  const std::string greeted = std::string(established) + "220 ready\r\n";
  CHECK(client.read_bytes(greeted.size()) == greeted);
  REQUIRE(client.send("HELO sandbox\r\n"));
  CHECK(client.read_bytes(14) == "HELO sandbox\r\n");
  client.shut_sending();
  CHECK(client.read_to_end().empty());
  CHECK(client.ended());
}

TEST_CASE("a megabyte each way through a tunnel, counted exactly") {
  loopback_server server(echo);
  const std::string authority = "bulk.example.test:" + port_text(server.port());
  auto proxy = start_proxy(world(patterns({authority}), {{"bulk.example.test", {"127.0.0.1"}}}));
  raw_socket client(proxy.port);
  REQUIRE(client.send(connect_head(authority)));
  REQUIRE(client.read_head() == established);
  std::string payload(1 << 20, '\0');
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 7 % 251);
  std::thread writer([&] { client.send(payload); });
  const std::string back = client.read_bytes(payload.size());
  writer.join();
  CHECK(back == payload);
  client.shut_sending();
  CHECK(client.read_to_end().empty());
  const auto meters =
      meters_when(*proxy.proxy, [&](const egress_meters& m) { return m.bytes_received == payload.size(); });
  CHECK(meters.bytes_sent == payload.size());
  CHECK(meters.bytes_received == payload.size());
}
