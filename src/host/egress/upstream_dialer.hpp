#pragma once
// Reaching a request's destination: a name resolved by the proxy itself (or its answer of a moment
// ago reused, name_cache.hpp) and its answer vetted (address_class.hpp), an IP literal taken as it
// is (a pattern names exactly it), then a connection to the first address that takes one, never to
// one of the proxy's own listeners.
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "egress/egress_proxy.hpp"
#include "egress/name_cache.hpp"
#include "egress/proxy_refusal.hpp"
#include "egress/proxy_request.hpp"

namespace psych::host::egress {

/// The system's resolver: getaddrinfo on Asio's resolver thread, its answer deduplicated.
egress_resolver system_resolver();

class upstream_dialer {
 public:
  upstream_dialer(const boost::asio::any_io_executor& executor, const egress_proxy_options& options,
                  const std::vector<boost::asio::ip::tcp::endpoint>& own_listeners, name_cache& names);

  /// Connects `socket` to the target's destination, or says why not: dns_error, dns_timeout,
  /// destination_ip_prohibited, connection_refused, destination_unavailable, connection_timeout.
  boost::asio::awaitable<refusal_or<void>> reach(const proxy_target& target, boost::asio::ip::tcp::socket& socket);

  /// From the connection's expiry: the resolving reach() waits on ends now, and reach() answers its
  /// timeout. (The connection cancels the socket's connect itself.)
  void cancel();

 private:
  struct pending_answer;
  /// A name's addresses that may be connected to, and whether they were a reused answer.
  struct destination_addresses {
    std::vector<boost::asio::ip::address> permitted;
    bool reused = false;
  };
  boost::asio::awaitable<egress_answer> resolve(const std::string& host);
  /// The name's vetted addresses: the cache's while it has them (unless `fresh`), else the resolver's.
  boost::asio::awaitable<refusal_or<destination_addresses>> addresses_of(const std::string& host, bool fresh);
  /// A connection to the first of `addresses` that takes one.
  boost::asio::awaitable<refusal_or<void>> connect(const proxy_target& target,
                                                   const std::vector<boost::asio::ip::address>& addresses,
                                                   boost::asio::ip::tcp::socket& socket);

  boost::asio::any_io_executor executor_;
  const egress_proxy_options& options_;
  const std::vector<boost::asio::ip::tcp::endpoint>& own_listeners_;
  name_cache& names_;
  std::shared_ptr<pending_answer> waiting_;
  bool cancelled_ = false;
};

}  // namespace psych::host::egress
