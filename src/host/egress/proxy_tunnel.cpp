// A CONNECT tunnel: the 200, then the program's first bytes held to the CONNECT's host before any
// of them reaches the world (a TLS ClientHello's server name must be that host, and on a TLS port,
// 443, the bytes must be TLS), then both directions relayed until both have ended. docs/network.md.
#include <algorithm>
#include <array>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "egress/client_hello.hpp"
#include "egress/proxy_connection.hpp"

namespace psych::host::egress {

namespace asio = boost::asio;

namespace {

constexpr auto tunnel_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::string_view established = "HTTP/1.1 200 Connection established\r\n\r\n";
/// A fatal alert, access_denied (RFC 8446, 6.2), in a TLS 1.2 record: what a TLS client reads as
/// "refused" before any handshake.
constexpr std::array<char, 7> access_denied{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x31};
constexpr std::uint8_t tls_handshake = 0x16;
/// How long a tunnel's last words (the alert) may take.
constexpr std::chrono::seconds alert_time{2};

/// Why a ClientHello's server name does not fit the CONNECT, if it does not. A name is reached only
/// under its own name (so a shared address, a CDN's, cannot be asked for another site); an address
/// only without one, as TLS clients reach an address.
std::optional<proxy_refusal> server_name_refusal(const proxy_target& target, const std::optional<std::string>& name) {
  const auto denied = [](std::string detail) {
    return proxy_refusal{0, proxy_error::http_request_denied, std::move(detail)};
  };
  if (!name) {
    if (target.host.ip_literal) return std::nullopt;
    return denied(fmt::format("a TLS ClientHello without a server name, to the name {}", target.host.host));
  }
  if (target.host.ip_literal)
    return denied(fmt::format("a TLS server name ({}) to the address {}", printable(*name, 100), target.host.host));
  const auto named = canonicalize_host(*name);
  if (!named || named->ip_literal || named->host != target.host.host)
    return denied(
        fmt::format("the TLS server name {} is not the CONNECT's host {}", printable(*name, 100), target.host.host));
  return std::nullopt;
}

}  // namespace

void proxy_connection::open_gate() {
  gate_open_ = true;
  gate_.cancel();
}

bool proxy_connection::tls_only(const proxy_target& target) const {
  return std::ranges::find(context_.options.tls_ports, target.port) != context_.options.tls_ports.end();
}

asio::awaitable<void> proxy_connection::tunnel(const proxy_target& target) {
  using namespace asio::experimental::awaitable_operators;
  clock_.step(context_.options.head_timeout);  // on a TLS port the ClientHello's too, from the 200 on
  auto [ec, n] = co_await asio::async_write(client_, asio::buffer(established), tunnel_tuple);
  if (ec || clock_.expired() != expiry::none) co_return;
  if (!tls_only(target)) clock_.step(std::nullopt);
  clock_.flowing();
  const auto [program_end, world_end] = co_await (program_to_world(target) && world_to_program(tls_only(target)));
  count_cut(program_end, world_end);
}

asio::awaitable<proxy_connection::relay_end> proxy_connection::program_to_world(const proxy_target& target) {
  // What followed the CONNECT's head in the same read is the first of the program's bytes.
  std::string first(static_cast<const char*>(buffer_.data().data()), buffer_.size());
  buffer_.consume(buffer_.size());
  if (co_await inspect_first_bytes(target, first) != first_bytes::pass) {
    end_both();
    co_return relay_end::stopped;
  }
  context_.tally.allowed();
  clock_.step(std::nullopt);
  open_gate();
  if (!first.empty())
    if (const auto sent = co_await send(upstream_, first); sent != relay_end::finished) co_return sent;
  co_return co_await relay(client_, upstream_);
}

asio::awaitable<proxy_connection::relay_end> proxy_connection::world_to_program(bool after_hello) {
  if (after_hello && !gate_open_) co_await gate_.async_wait(tunnel_tuple);
  if (ending_) co_return relay_end::stopped;
  co_return co_await relay(upstream_, client_);
}

asio::awaitable<proxy_connection::first_bytes> proxy_connection::inspect_first_bytes(const proxy_target& target,
                                                                                     std::string& first) {
  const auto& options = context_.options;
  const bool tls_port = tls_only(target);
  bool hello_timed = tls_port;
  for (;;) {
    if (!first.empty()) {
      if (static_cast<std::uint8_t>(first.front()) != tls_handshake) {
        if (!tls_port) co_return first_bytes::pass;
        const proxy_refusal not_tls{0, proxy_error::tls_protocol_error,
                                    fmt::format("bytes that are not TLS, to port {}", target.port)};
        co_return co_await refuse_in_tunnel(not_tls, false);
      }
      if (!hello_timed) {
        clock_.step(options.head_timeout);
        hello_timed = true;
      }
      const auto scan = scan_client_hello(first);
      if (scan.state == hello_state::complete) {
        if (const auto refusal = server_name_refusal(target, scan.server_name))
          co_return co_await refuse_in_tunnel(*refusal, true);
        co_return first_bytes::pass;
      }
      if (scan.state == hello_state::malformed) {
        const proxy_refusal malformed{0, proxy_error::tls_protocol_error,
                                      fmt::format("a ClientHello that does not parse: {}", scan.problem)};
        co_return co_await refuse_in_tunnel(malformed, true);
      }
      if (first.size() >= client_hello_bound) {
        const proxy_refusal large{0, proxy_error::tls_protocol_error,
                                  fmt::format("no whole ClientHello in the first {} bytes", client_hello_bound)};
        co_return co_await refuse_in_tunnel(large, true);
      }
    }
    const std::size_t had = first.size();
    first.resize(client_hello_bound);
    auto [ec, n] =
        co_await client_.async_read_some(asio::buffer(first.data() + had, client_hello_bound - had), tunnel_tuple);
    first.resize(had + n);
    if (clock_.expired() == expiry::step) {
      const proxy_refusal slow{0, proxy_error::tls_protocol_error,
                               fmt::format("no whole ClientHello within {}", bound_text(options.head_timeout))};
      co_return co_await refuse_in_tunnel(slow, true);
    }
    if (ending_ || clock_.expired() != expiry::none) co_return first_bytes::gone;
    // A program that ends its side before a word may still be answered (a server that speaks
    // first); one that ends it inside a ClientHello has sent nothing the world may see.
    if (ec == asio::error::eof && first.empty()) co_return first_bytes::pass;
    if (ec) co_return first_bytes::gone;
  }
}

asio::awaitable<proxy_connection::first_bytes> proxy_connection::refuse_in_tunnel(const proxy_refusal& refusal,
                                                                                  bool alert) {
  record(refusal);
  ending_ = true;
  boost::system::error_code ignored;
  upstream_.cancel(ignored);  // the world says nothing more to the program
  open_gate();
  if (alert && !writing_to_program_) {
    clock_.step(alert_time);
    co_await asio::async_write(client_, asio::buffer(access_denied), tunnel_tuple);
  }
  co_await close_gently();
  co_return first_bytes::refused;
}

}  // namespace psych::host::egress
