#pragma once
// The hosts a network=allowlist grant reaches (docs/network.md). A pattern is an exact name
// ("api.example.com"), every name under one ("*.example.com": one label or more in front, never
// "example.com" itself), or an IP literal ("192.0.2.7", "[2001:db8::1]"), each with an optional
// port. Without a port a pattern allows 80 and 443, the web's two: a grant that means "any port"
// must say so with one pattern per port, since a name's other ports (SSH, a database) are other
// services. Names are compared as lowercase ASCII; a single trailing dot is dropped. A pattern is
// never wider than it reads: "*.com" and "*" are refused, and a name is never matched by address.
//
// The three lists an execution's grant comes from (the profile's, the tenant policy's, the
// Spec's) are intersected: a name survives only if every list allows it, and the intersection
// of two patterns is the narrower of the two (or nothing). Pure: no I/O, no resolution.
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "psych/result.hpp"

namespace psych {

struct host_pattern {
  /// Lowercase: a name without the wildcard ("example.com" for "*.example.com"), or an IP literal
  /// as written without brackets ("2001:db8::1").
  std::string host;
  bool any_subdomain = false;          ///< "*." in front: every name under `host`, not `host` itself
  bool ip_literal = false;             ///< `host` is an IPv4 or IPv6 address, not a name
  std::optional<std::uint16_t> port;   ///< absent: 80 and 443
  friend bool operator==(const host_pattern&, const host_pattern&) = default;
};

namespace host_pattern_detail {

inline constexpr std::array<std::uint16_t, 2> default_ports{80, 443};

constexpr char lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

inline std::string lowered(std::string_view text) {
  std::string out(text);
  std::ranges::transform(out, out.begin(), lower);
  return out;
}

/// A dotted quad of decimal octets without leading zeros (no "010.1.1.1": resolvers differ on it).
inline bool is_ipv4(std::string_view text) {
  int parts = 0;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t end = std::min(text.find('.', at), text.size());
    const std::string_view part = text.substr(at, end - at);
    if (part.empty() || part.size() > 3 || (part.size() > 1 && part[0] == '0')) return false;
    int value = 0;
    for (const char c : part) {
      if (c < '0' || c > '9') return false;
      value = value * 10 + (c - '0');
    }
    if (value > 255) return false;
    ++parts;
    at = end + 1;
    if (end == text.size()) break;
  }
  return parts == 4;
}

/// An IPv4 address's four octets, for an IPv6 address that ends in one.
inline std::optional<std::array<std::uint16_t, 2>> ipv4_as_groups(std::string_view text) {
  if (!is_ipv4(text)) return std::nullopt;
  std::array<unsigned, 4> octets{};
  std::size_t at = 0;
  for (auto& octet : octets) {
    const std::size_t end = std::min(text.find('.', at), text.size());
    for (const char c : text.substr(at, end - at)) octet = octet * 10 + static_cast<unsigned>(c - '0');
    at = end + 1;
  }
  return std::array<std::uint16_t, 2>{static_cast<std::uint16_t>(octets[0] << 8 | octets[1]),
                                      static_cast<std::uint16_t>(octets[2] << 8 | octets[3])};
}

/// One side of an IPv6 address's "::": hex groups of 1 to 4 digits split by single colons, the
/// last of the right side (`may_end_in_ipv4`) possibly a dotted quad.
inline std::optional<std::vector<std::uint16_t>> ipv6_groups(std::string_view text, bool may_end_in_ipv4) {
  std::vector<std::uint16_t> groups;
  if (text.empty()) return groups;
  std::size_t at = 0;
  while (true) {
    const std::size_t end = std::min(text.find(':', at), text.size());
    const std::string_view group = text.substr(at, end - at);
    if (end == text.size() && may_end_in_ipv4 && group.find('.') != std::string_view::npos) {
      const auto quad = ipv4_as_groups(group);
      if (!quad) return std::nullopt;
      groups.insert(groups.end(), quad->begin(), quad->end());
      return groups;
    }
    if (group.empty() || group.size() > 4) return std::nullopt;
    unsigned value = 0;
    for (const char c : group) {
      const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (digit < 0) return std::nullopt;
      value = value * 16 + static_cast<unsigned>(digit);
    }
    groups.push_back(static_cast<std::uint16_t>(value));
    if (end == text.size()) return groups;
    at = end + 1;
  }
}

/// An IPv6 address (lowercase text, no brackets, no zone: a zone names an interface of the host,
/// never a destination to allow) as its eight groups.
inline std::optional<std::array<std::uint16_t, 8>> parse_ipv6(std::string_view text) {
  if (text.size() < 2 || text.size() > 45 || text.find(':') == std::string_view::npos) return std::nullopt;
  const std::size_t gap = text.find("::");
  std::optional<std::vector<std::uint16_t>> left, right;
  if (gap == std::string_view::npos) {
    left = ipv6_groups(text, true);
    right.emplace();
    if (!left || left->size() != 8) return std::nullopt;
  } else {
    if (text.find("::", gap + 1) != std::string_view::npos) return std::nullopt;
    left = ipv6_groups(text.substr(0, gap), false);
    right = ipv6_groups(text.substr(gap + 2), true);
    if (!left || !right || left->size() + right->size() > 7) return std::nullopt;
  }
  std::array<std::uint16_t, 8> groups{};
  std::ranges::copy(*left, groups.begin());
  std::ranges::copy(*right, groups.end() - static_cast<std::ptrdiff_t>(right->size()));
  return groups;
}

/// RFC 5952's one spelling of an address: lowercase hex without leading zeros, the longest run of
/// two or more zero groups (the first of equals) as "::", an IPv4-mapped address's last 32 bits
/// dotted. So "2001:DB8:0:0::1" and "2001:db8::1" are one pattern, and one host.
inline std::string format_ipv6(const std::array<std::uint16_t, 8>& groups) {
  // An IPv4-mapped address keeps its IPv4 part dotted (RFC 5952, 5): "::ffff:192.0.2.1".
  if (std::all_of(groups.begin(), groups.begin() + 5, [](std::uint16_t g) { return g == 0; }) && groups[5] == 0xffff)
    return "::ffff:" + std::to_string(groups[6] >> 8) + "." + std::to_string(groups[6] & 0xff) + "." +
           std::to_string(groups[7] >> 8) + "." + std::to_string(groups[7] & 0xff);
  std::size_t best_at = 8, best_length = 0;
  for (std::size_t at = 0; at < 8;) {
    std::size_t length = 0;
    while (at + length < 8 && groups[at + length] == 0) ++length;
    if (length >= 2 && length > best_length) best_at = at, best_length = length;
    at += length ? length : 1;
  }
  constexpr std::string_view hex = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < 8; ++i) {
    if (i == best_at) {
      out += "::";
      i += best_length - 1;
      continue;
    }
    if (!out.empty() && !out.ends_with(':')) out += ':';
    bool digits = false;
    for (int shift = 12; shift >= 0; shift -= 4) {
      const unsigned digit = (groups[i] >> shift) & 0xFu;
      if (digit || digits || shift == 0) out += hex[digit], digits = true;
    }
  }
  return out;
}

/// Letters, digits and inner hyphens, 1 to 63 of them, per label; 253 in all; at least one letter
/// somewhere (an all-digit name would read as an address to some resolvers).
inline bool is_name(std::string_view text) {
  if (text.empty() || text.size() > 253) return false;
  bool letter = false;
  std::size_t at = 0;
  while (true) {
    const std::size_t end = std::min(text.find('.', at), text.size());
    const std::string_view label = text.substr(at, end - at);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') return false;
    for (const char c : label) {
      if (c >= 'a' && c <= 'z') letter = true;
      else if (!((c >= '0' && c <= '9') || c == '-')) return false;
    }
    if (end == text.size()) break;
    at = end + 1;
  }
  return letter;
}

inline std::size_t label_count(std::string_view name) { return 1 + static_cast<std::size_t>(std::ranges::count(name, '.')); }

/// `name` is strictly under `suffix`: "a.b.example.com" under "example.com", "example.com" not.
inline bool strictly_under(std::string_view name, std::string_view suffix) {
  return name.size() > suffix.size() + 1 && name.ends_with(suffix) && name[name.size() - suffix.size() - 1] == '.';
}

inline bool port_allowed(const std::optional<std::uint16_t>& pattern_port, std::uint16_t port) {
  return pattern_port ? *pattern_port == port : std::ranges::find(default_ports, port) != default_ports.end();
}

}  // namespace host_pattern_detail

/// A host as a CONNECT line or a request's authority names it, made comparable: lowercase, one
/// trailing dot dropped, brackets taken off an IPv6 literal. Nullopt when it is neither a name
/// nor an address (so a proxy refuses it as malformed, never matches it loosely).
struct canonical_host {
  std::string host;
  bool ip_literal = false;
};

inline std::optional<canonical_host> canonicalize_host(std::string_view text) {
  using namespace host_pattern_detail;
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    const auto groups = parse_ipv6(lowered(text.substr(1, text.size() - 2)));
    if (!groups) return std::nullopt;
    return canonical_host{format_ipv6(*groups), true};
  }
  std::string host = lowered(text);
  if (host.ends_with('.')) host.pop_back();
  if (is_ipv4(host)) return canonical_host{std::move(host), true};
  if (const auto groups = parse_ipv6(host)) return canonical_host{format_ipv6(*groups), true};
  if (!is_name(host)) return std::nullopt;
  return canonical_host{std::move(host), false};
}

/// "api.example.com", "*.example.com:8443", "192.0.2.7", "[2001:db8::1]:443". Whitespace, a
/// scheme, a path, user information, a bare "*", a wildcard anywhere but the whole first label, a
/// wildcard over fewer than two labels ("*.com"), and a port of 0 or past 65535 are refused,
/// naming the pattern.
inline result<host_pattern> parse_host_pattern(std::string_view text) {
  using namespace host_pattern_detail;
  const auto refuse = [&](std::string_view why) {
    return fail_with(error_kind::invalid_argument,
                     std::string("host pattern \"").append(text).append("\": ").append(why));
  };
  if (text.empty()) return refuse("empty");
  if (text.find("://") != std::string_view::npos) return refuse("a host, not a URL: no scheme");
  if (text.find_first_of("/?#@") != std::string_view::npos) return refuse("a host, not a URL: no path, query or user");
  host_pattern pattern;
  std::string_view host = text;
  // The port: after the closing bracket of an IPv6 literal, else after the only colon.
  std::optional<std::string_view> port_text;
  if (host.front() == '[') {
    const std::size_t close = host.find(']');
    if (close == std::string_view::npos) return refuse("an IPv6 literal without its closing bracket");
    if (close + 1 < host.size()) {
      if (host[close + 1] != ':') return refuse("only a port may follow an IPv6 literal");
      port_text = host.substr(close + 2);
    }
    host = host.substr(0, close + 1);
  } else if (const std::size_t colon = host.find(':'); colon != std::string_view::npos) {
    if (host.find(':', colon + 1) != std::string_view::npos)
      return refuse("an IPv6 literal is written in brackets: [2001:db8::1]:443");
    port_text = host.substr(colon + 1);
    host = host.substr(0, colon);
  }
  if (port_text) {
    if (port_text->empty() || port_text->size() > 5) return refuse("the port is not 1 to 65535");
    unsigned value = 0;
    for (const char c : *port_text) {
      if (c < '0' || c > '9') return refuse("the port is not 1 to 65535");
      value = value * 10 + static_cast<unsigned>(c - '0');
    }
    if (value == 0 || value > 65535) return refuse("the port is not 1 to 65535");
    pattern.port = static_cast<std::uint16_t>(value);
  }
  if (host.starts_with("*.")) {
    pattern.any_subdomain = true;
    host.remove_prefix(2);
  }
  const auto canonical = canonicalize_host(host);
  if (!canonical)
    return refuse(host.find('*') != std::string_view::npos
                      ? "a wildcard stands only for the whole first label, as in *.example.com"
                      : "not a host name (letters, digits, hyphens and dots) or an IP address");
  pattern.host = canonical->host;
  pattern.ip_literal = canonical->ip_literal;
  if (pattern.any_subdomain && pattern.ip_literal) return refuse("a wildcard applies to names, not to addresses");
  if (pattern.any_subdomain && label_count(pattern.host) < 2)
    return refuse("a wildcard must stand under at least two labels (*.example.com, not *.com)");
  return pattern;
}

/// The pattern as parse_host_pattern reads it back (its canonical spelling).
inline std::string to_string(const host_pattern& pattern) {
  std::string out = pattern.any_subdomain ? "*." : "";
  const bool v6 = pattern.ip_literal && pattern.host.find(':') != std::string::npos;
  out += v6 ? "[" + pattern.host + "]" : pattern.host;
  if (pattern.port) out += ":" + std::to_string(*pattern.port);
  return out;
}

/// Whether `pattern` allows `host` (canonical, as canonicalize_host made it) at `port`. An IP
/// literal is allowed only by a pattern that is that literal; a name never by an address.
inline bool allows(const host_pattern& pattern, const canonical_host& host, std::uint16_t port) {
  using namespace host_pattern_detail;
  if (!port_allowed(pattern.port, port) || pattern.ip_literal != host.ip_literal) return false;
  return pattern.any_subdomain ? strictly_under(host.host, pattern.host) : host.host == pattern.host;
}

inline bool allows(const std::vector<host_pattern>& patterns, const canonical_host& host, std::uint16_t port) {
  return std::ranges::any_of(patterns, [&](const host_pattern& p) { return allows(p, host, port); });
}

/// What both patterns allow, as one pattern, or nullopt when they share nothing.
inline std::optional<host_pattern> intersect(const host_pattern& a, const host_pattern& b) {
  using namespace host_pattern_detail;
  if (a.ip_literal != b.ip_literal) return std::nullopt;
  std::optional<std::uint16_t> port;
  if (a.port && b.port) {
    if (*a.port != *b.port) return std::nullopt;
    port = a.port;
  } else if (a.port || b.port) {
    port = a.port ? a.port : b.port;
    if (!port_allowed(std::nullopt, *port)) return std::nullopt;
  }
  host_pattern out;
  out.ip_literal = a.ip_literal;
  out.port = port;
  if (!a.any_subdomain && !b.any_subdomain) {
    if (a.host != b.host) return std::nullopt;
    out.host = a.host;
  } else if (a.any_subdomain && b.any_subdomain) {
    // The deeper suffix is the narrower set; two unrelated suffixes share nothing.
    if (a.host == b.host || strictly_under(a.host, b.host)) out.host = a.host;
    else if (strictly_under(b.host, a.host)) out.host = b.host;
    else return std::nullopt;
    out.any_subdomain = true;
  } else {
    const host_pattern& exact = a.any_subdomain ? b : a;
    const host_pattern& wild = a.any_subdomain ? a : b;
    if (!strictly_under(exact.host, wild.host)) return std::nullopt;
    out.host = exact.host;
  }
  return out;
}

/// What both lists allow: every pairwise intersection, without duplicates or patterns another
/// one of the result already covers. Empty when they share nothing.
inline std::vector<host_pattern> intersect(const std::vector<host_pattern>& a, const std::vector<host_pattern>& b) {
  std::vector<host_pattern> out;
  for (const auto& x : a)
    for (const auto& y : b)
      if (auto both = intersect(x, y); both && std::ranges::find(out, *both) == out.end()) out.push_back(*std::move(both));
  // Drop what a wider member already allows ("api.example.com" beside "*.example.com").
  std::vector<host_pattern> kept;
  for (const auto& p : out) {
    const bool covered = std::ranges::any_of(out, [&](const host_pattern& wider) {
      return !(wider == p) && intersect(wider, p) == p;
    });
    if (!covered) kept.push_back(p);
  }
  return kept;
}

}  // namespace psych

namespace psych {

/// Each pattern of `texts` parsed and spelled canonically; the first that does not parse fails the
/// whole list, naming it.
inline result<std::vector<std::string>> canonical_host_list(const std::vector<std::string>& texts) {
  std::vector<std::string> out;
  for (const auto& text : texts) {
    PSYCH_TRY(const host_pattern pattern, parse_host_pattern(text));
    if (std::string spelling = to_string(pattern); std::ranges::find(out, spelling) == out.end())
      out.push_back(std::move(spelling));
  }
  return out;
}

/// intersect() over lists spelled as text (the form terms, Specs and frames carry them in).
inline result<std::vector<std::string>> intersect_host_lists(const std::vector<std::string>& a,
                                                             const std::vector<std::string>& b) {
  const auto parsed = [](const std::vector<std::string>& texts) -> result<std::vector<host_pattern>> {
    std::vector<host_pattern> out;
    for (const auto& text : texts) {
      PSYCH_TRY(host_pattern pattern, parse_host_pattern(text));
      out.push_back(std::move(pattern));
    }
    return out;
  };
  PSYCH_TRY(const auto first, parsed(a));
  PSYCH_TRY(const auto second, parsed(b));
  std::vector<std::string> out;
  for (const auto& pattern : intersect(first, second)) out.push_back(to_string(pattern));
  return out;
}

/// The first pattern of `asked` that `cap` does not wholly allow (within it, not merely
/// touching it), or one that does not parse; nullopt when every one is within.
inline std::optional<std::string> first_host_beyond(const std::vector<std::string>& asked,
                                                    const std::vector<std::string>& cap) {
  for (const auto& host : asked) {
    const auto spelled = canonical_host_list({host});
    const auto within = intersect_host_lists({host}, cap);
    if (!spelled || !within || within.value() != spelled.value()) return host;
  }
  return std::nullopt;
}

}  // namespace psych
