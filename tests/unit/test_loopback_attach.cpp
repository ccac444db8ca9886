// src/host/execution/loopback_attach: the host's listener for a launcher that attaches over loopback TCP.
// Connections that do not prove the secret for the stream asked for are dropped, whatever they
// send (or do not send), and the one that does is taken with nothing after its proof consumed.
#include <doctest/doctest.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>

#include "execution/loopback_attach.hpp"
#include "psych/protocol/json.hpp"

using namespace psych;
namespace asio = boost::asio;
using asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

std::string attach_line(const std::string& secret, protocol::attached_stream stream) {
  return protocol::encode_frame(protocol::attach_frame{.secret = secret, .stream = stream});
}

/// A client of the listener on a thread of its own: connects, writes `bytes`, keeps the connection
/// open for `hold`, and reads what comes back (the proof's answer is nothing: the host reads).
struct client {
  client(std::uint16_t port, std::string bytes, std::chrono::milliseconds hold = 0ms)
      : worker([port, bytes = std::move(bytes), hold] {
          asio::io_context io;
          tcp::socket socket(io);
          boost::system::error_code ec;
          socket.connect({asio::ip::address_v4::loopback(), port}, ec);
          if (ec) return;
          asio::write(socket, asio::buffer(bytes), ec);
          std::this_thread::sleep_for(hold);
        }) {}
  std::jthread worker;
};

/// What one accept came to: the accepted connection, or the failure's text.
struct accepted {
  std::optional<host::attach_listener::attached_socket> socket;
  std::string failure;
};

/// One accept for `stream` on `io`, its outcome into `got` once `io` has run it.
void start_accept(asio::io_context& io, host::attach_listener& listener, protocol::attached_stream stream,
                  accepted& got) {
  asio::co_spawn(io, [&listener, stream, &got]() -> asio::awaitable<void> {
    auto taken = co_await listener.accept(stream);
    if (taken) got.socket.emplace(std::move(taken).value());
    else got.failure = taken.error().message();
  }, asio::detached);
}

}  // namespace

TEST_CASE("loopback attach: only the connection that proves the secret for its stream is taken") {
  asio::io_context io;
  host::attach_listener listener(io);
  REQUIRE(listener.open());
  CHECK(listener.port() != 0);
  CHECK(listener.secret().size() == 32);
  const auto port = listener.port();
  const auto secret = listener.secret();

  // Impostors first, each in its own way; the launcher's proof last, with its first frame after it.
  std::string wrong_secret = secret;
  wrong_secret[0] = wrong_secret[0] == 'a' ? 'b' : 'a';
  const std::string follows = "{\"type\":\"started\"}\n";
  std::vector<std::unique_ptr<client>> clients;
  clients.push_back(std::make_unique<client>(port, attach_line(wrong_secret, protocol::attached_stream::control)));
  clients.push_back(std::make_unique<client>(port, attach_line(secret, protocol::attached_stream::channel)));
  clients.push_back(std::make_unique<client>(port, "GET / HTTP/1.1\r\n\r\n"));
  clients.push_back(std::make_unique<client>(port, std::string(4096, 'x') + "\n"));
  clients.push_back(std::make_unique<client>(port, "", 3s));  // says nothing: dropped at the proof's deadline
  // The real one connects only once the impostors are queued ahead of it.
  std::this_thread::sleep_for(200ms);
  clients.push_back(std::make_unique<client>(port, attach_line(secret, protocol::attached_stream::control) + follows, 2s));

  accepted got;
  start_accept(io, listener, protocol::attached_stream::control, got);
  const auto began = std::chrono::steady_clock::now();
  io.run();
  INFO("failure: " << got.failure);
  REQUIRE(got.socket);
  CHECK(listener.dropped() == 5);
  // The silent one held the wait for its proof's deadline, no longer.
  CHECK(std::chrono::steady_clock::now() - began < host::attach_listener::proof_patience + 2s);

  // Nothing after the proof was taken from the stream: the launcher's next frame is all there.
  asio::streambuf rest;
  boost::system::error_code ec;
  asio::read_until(*got.socket, rest, '\n', ec);
  REQUIRE_FALSE(ec);
  CHECK(std::string(asio::buffers_begin(rest.data()), asio::buffers_end(rest.data())) == follows);
}

TEST_CASE("loopback attach: closing the listener ends a wait in progress with a failure") {
  asio::io_context io;
  host::attach_listener listener(io);
  REQUIRE(listener.open());
  accepted got;
  start_accept(io, listener, protocol::attached_stream::channel, got);
  asio::steady_timer later(io, 100ms);
  later.async_wait([&](boost::system::error_code) { listener.close(); });
  io.run();
  CHECK_FALSE(got.socket);
  CHECK(got.failure.find("no channel connection proved the launch's secret") != std::string::npos);
}
