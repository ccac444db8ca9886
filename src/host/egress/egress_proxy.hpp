#pragma once
// The egress allowlist's proxy (docs/network.md, "The proxy"). A sandboxed program whose network
// reaches nothing is given HTTP_PROXY and HTTPS_PROXY naming a listener inside its own network
// namespace; the host serves that listener here. The proxy admits CONNECT host:port and plain
// http:// requests to the hosts a network=allowlist grant names, resolves those names itself,
// connects only to addresses it vetted, holds a TLS client's server name to the CONNECT's host, and
// answers every refusal at once and explicitly. Its connections are made in the host's network
// namespace, whatever namespace its listeners were made in.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/address.hpp>

#include "egress/egress_meters.hpp"
#include "psych/host_pattern.hpp"
#include "psych/result.hpp"

namespace psych::host {

/// A name's addresses, or why there are none.
using egress_answer = result<std::vector<boost::asio::ip::address>>;
/// How the proxy resolves a name. It must not block: it calls `done` at most once, on the proxy's
/// thread (within the call, or from a handler it starts on `executor`), and keeps it no longer than
/// the proxy's event loop lives (a handler of `executor` is destroyed with it).
using egress_resolver = std::function<void(const boost::asio::any_io_executor& executor, const std::string& host,
                                           std::function<void(egress_answer)> done)>;

struct egress_proxy_options {
  /// The destinations allowed (host_pattern.hpp); nothing else is.
  std::vector<host_pattern> allowed;
  /// A request head must arrive whole within this of the connection's start; so must a CONNECT
  /// tunnel's ClientHello (on a TLS port from the 200, elsewhere from its first byte).
  std::chrono::milliseconds head_timeout{10'000};
  /// Resolving and connecting to the destination, together.
  std::chrono::milliseconds connect_timeout{10'000};
  /// How long later connections reuse a name's addresses (egress/name_cache.hpp); zero: every
  /// connection has its name resolved anew. A connection that reaches none of a reused answer's
  /// addresses has the name resolved again.
  std::chrono::milliseconds name_cache_for{30'000};
  /// No byte either way for this long ends a connection.
  std::chrono::milliseconds idle_timeout{60'000};
  /// No connection outlives this (the caller passes its execution's wall clock).
  std::chrono::milliseconds connection_lifetime{std::chrono::hours(1)};
  /// Bytes both ways, per connection, a plain request's head included.
  std::uint64_t connection_bytes = std::uint64_t{1} << 30;
  /// Ports where a tunnel's first bytes must be a TLS ClientHello (elsewhere bytes that are not TLS
  /// pass), and where the head timeout runs for it from the 200 on.
  std::vector<std::uint16_t> tls_ports{443};
  /// Connections served at once; one more is answered 503 at once.
  std::size_t max_connections = 64;
  /// Empty: the system's resolver (getaddrinfo, through Asio).
  egress_resolver resolve;
  /// For a test's fake internet on loopback: addresses vetted as if public. psych's own callers never
  /// set it.
  std::vector<boost::asio::ip::address> treat_as_public;
};

/// Serves its listeners until stop() or its destruction, on its own event loop and thread.
class egress_proxy {
 public:
  /// Takes ownership of `listeners`: TCP sockets already listening (IPv4 or IPv6), in any network
  /// namespace. Refused, closing them all, when one is not such a socket.
  static result<std::unique_ptr<egress_proxy>> start(egress_proxy_options options, std::vector<int> listeners);

  egress_proxy(const egress_proxy&) = delete;
  egress_proxy& operator=(const egress_proxy&) = delete;
  ~egress_proxy();

  /// What it has done so far; safe from any thread, during and after serving.
  [[nodiscard]] egress_meters meters() const;
  /// Closes the listeners and every connection and joins the proxy's thread; returns once nothing
  /// of the proxy runs. A name being resolved by the system is waited for (its own timeout bounds it).
  void stop();

 private:
  egress_proxy();
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace psych::host
