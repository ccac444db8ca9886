#include "egress/address_class.hpp"

#include <algorithm>
#include <array>
#include <cstdint>

namespace psych::host::egress {

namespace {

struct ipv4_range {
  std::uint32_t network;
  int prefix;
  address_class kind;
};

constexpr std::array<ipv4_range, 10> ipv4_ranges{{
    {0x00000000, 8, address_class::unspecified},
    {0x7f000000, 8, address_class::loopback},
    {0x0a000000, 8, address_class::private_use},
    {0xac100000, 12, address_class::private_use},
    {0xc0a80000, 16, address_class::private_use},
    {0x64400000, 10, address_class::private_use},
    {0xc6120000, 15, address_class::private_use},
    {0xa9fe0000, 16, address_class::link_local},
    {0xe0000000, 4, address_class::multicast},
    {0xf0000000, 4, address_class::reserved},
}};

address_class classify_ipv4(std::uint32_t address) {
  for (const auto& range : ipv4_ranges)
    if ((address >> (32 - range.prefix)) == (range.network >> (32 - range.prefix))) return range.kind;
  return address_class::public_address;
}

using ipv6_bytes = boost::asio::ip::address_v6::bytes_type;

std::uint32_t ipv4_at(const ipv6_bytes& bytes, std::size_t at, std::uint8_t flip = 0) {
  std::uint32_t out = 0;
  for (std::size_t i = at; i < at + 4; ++i) out = out << 8 | static_cast<std::uint8_t>(bytes[i] ^ flip);
  return out;
}

bool starts_with(const ipv6_bytes& bytes, std::initializer_list<std::uint8_t> prefix) {
  return std::equal(prefix.begin(), prefix.end(), bytes.begin());
}

bool zero_between(const ipv6_bytes& bytes, std::size_t from, std::size_t to) {
  return std::all_of(bytes.begin() + static_cast<std::ptrdiff_t>(from), bytes.begin() + static_cast<std::ptrdiff_t>(to),
                     [](std::uint8_t b) { return b == 0; });
}

address_class classify_ipv6(const ipv6_bytes& b) {
  if (zero_between(b, 0, 15) && b[15] <= 1) return b[15] == 0 ? address_class::unspecified : address_class::loopback;
  if (zero_between(b, 0, 12)) return classify_ipv4(ipv4_at(b, 12));                                    // compatible
  if (zero_between(b, 0, 10) && b[10] == 0xff && b[11] == 0xff) return classify_ipv4(ipv4_at(b, 12));  // mapped
  if (zero_between(b, 0, 8) && b[8] == 0xff && b[9] == 0xff && b[10] == 0 && b[11] == 0)
    return classify_ipv4(ipv4_at(b, 12));  // translated
  if (starts_with(b, {0x00, 0x64, 0xff, 0x9b}) && zero_between(b, 4, 12)) return classify_ipv4(ipv4_at(b, 12));
  if (starts_with(b, {0x00, 0x64, 0xff, 0x9b, 0x00, 0x01})) return address_class::private_use;
  if (starts_with(b, {0x20, 0x02})) return classify_ipv4(ipv4_at(b, 2));                     // 6to4
  if (starts_with(b, {0x20, 0x01, 0x00, 0x00})) return classify_ipv4(ipv4_at(b, 12, 0xff));  // Teredo, obscured
  if (starts_with(b, {0x01, 0x00}) && zero_between(b, 2, 8)) return address_class::reserved;
  if ((b[0] & 0xfe) == 0xfc) return address_class::private_use;
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return address_class::link_local;
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return address_class::private_use;
  if (b[0] == 0xff) return address_class::multicast;
  return address_class::public_address;
}

}  // namespace

address_class classify(const boost::asio::ip::address& address) {
  return address.is_v4() ? classify_ipv4(address.to_v4().to_uint()) : classify_ipv6(address.to_v6().to_bytes());
}

vetted_answer vet(std::span<const boost::asio::ip::address> answer,
                  std::span<const boost::asio::ip::address> treat_as_public) {
  vetted_answer out;
  for (const auto& address : answer) {
    const auto kind = classify(address);
    if (kind == address_class::public_address || std::ranges::find(treat_as_public, address) != treat_as_public.end()) {
      out.permitted.push_back(address);
      continue;
    }
    if (!out.refused.empty()) out.refused += ", ";
    out.refused.append(address.to_string()).append(" (").append(name_of(kind)).append(")");
  }
  return out;
}

}  // namespace psych::host::egress
