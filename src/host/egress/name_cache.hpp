#pragma once
// The answers the proxy's resolver gave, reused for a while by later connections to the same name:
// a program that opens many connections to one host waits for the resolver once, not each time
// (docs/network.md, "Names"). The system's resolver says nothing of a record's TTL, so an answer is
// kept for a fixed time (egress_proxy_options::name_cache_for), as browsers keep getaddrinfo's. Only
// answers with addresses are kept; every use vets them anew (address_class.hpp); an answer none of
// whose addresses takes a connection is dropped, and a connection that used it has the name resolved
// again at once (upstream_dialer.cpp). One proxy's, used on its one thread only.
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/ip/address.hpp>

namespace psych::host::egress {

class name_cache {
 public:
  using clock = std::chrono::steady_clock;
  /// Names kept at most: a wildcard pattern lets a program name as many hosts as it likes.
  static constexpr std::size_t most_names = 256;

  /// The addresses `host` was last answered with, while that answer is younger than its keep.
  [[nodiscard]] std::optional<std::vector<boost::asio::ip::address>> find(const std::string& host,
                                                                          clock::time_point now) const;
  /// Keeps `addresses` (not empty) for `host` until `until`. A full cache first drops every answer
  /// past its time, then, if still full, the answer nearest its end.
  void keep(const std::string& host, std::vector<boost::asio::ip::address> addresses, clock::time_point until,
            clock::time_point now);
  void forget(const std::string& host);
  [[nodiscard]] std::size_t size() const { return answers_.size(); }

 private:
  struct answer {
    std::vector<boost::asio::ip::address> addresses;
    clock::time_point until;
  };
  std::unordered_map<std::string, answer> answers_;
};

}  // namespace psych::host::egress
