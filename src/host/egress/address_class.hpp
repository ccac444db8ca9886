#pragma once
// Which addresses the egress proxy never connects to on a name's behalf, whatever a DNS answer says:
// the host itself, the networks around it, and the cloud's metadata service. A name that resolves
// only to those (DNS rebinding to 127.0.0.1, a listed name pointing into a private network) is
// refused; an IP literal is exempt only because a pattern names exactly it. docs/network.md.
#include <span>
#include <string>
#include <vector>

#include <boost/asio/ip/address.hpp>

#include "psych/names.hpp"

namespace psych::host::egress {

enum class address_class {
  /// Reachable across the internet; the documentation ranges (192.0.2.0/24, 198.51.100.0/24,
  /// 203.0.113.0/24, 2001:db8::/32) are here too, since nothing routes them to the host.
  public_address,
  /// 127.0.0.0/8, ::1: the host itself.
  loopback,
  /// 0.0.0.0/8, ::: what connect() takes for the host itself.
  unspecified,
  /// 10/8, 172.16/12, 192.168/16, 100.64/10 (carrier-grade NAT), 198.18/15 (which local proxies hand
  /// out as stand-in addresses), fc00::/7, fec0::/10 (the old site-local), 64:ff9b:1::/48 (local NAT64).
  private_use,
  /// 169.254/16 (the metadata service 169.254.169.254 among them), fe80::/10.
  link_local,
  /// 224/4, ff00::/8.
  multicast,
  /// 240/4 with the broadcast address, and 100::/64 (IPv6's discard prefix).
  reserved,
};

/// The class of an address. An IPv6 address that carries an IPv4 one (::ffff:0:0/96 mapped,
/// ::ffff:0:0:0/96 translated, ::/96 compatible, 64:ff9b::/96 NAT64, 2002::/16 6to4, 2001::/32
/// Teredo's client) is the class of the IPv4 address it reaches.
address_class classify(const boost::asio::ip::address& address);

/// What may be connected to of a name's answer: the public addresses, and those a test's fake
/// internet names in `treat_as_public`, in the answer's order. `refused` lists the others with their
/// classes ("127.0.0.1 (loopback)"), for the refusal when nothing is permitted.
struct vetted_answer {
  std::vector<boost::asio::ip::address> permitted;
  std::string refused;
};
vetted_answer vet(std::span<const boost::asio::ip::address> answer,
                  std::span<const boost::asio::ip::address> treat_as_public);

}  // namespace psych::host::egress

namespace psych {
PSYCH_ENUM_NAMES(host::egress::address_class, "public", "loopback", "unspecified", "private", "link-local", "multicast",
                 "reserved");
}  // namespace psych
