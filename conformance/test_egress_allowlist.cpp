// network=allowlist (docs/network.md): a backend that holds it lets a program reach psych's egress
// proxy and nothing else, proven by hostile programs; one that cannot refuses it by name. No
// program here names a listed host: every request is for one no list names, which the proxy
// refuses before it resolves anything, so nothing leaves this machine. The fake internet that
// proves the listed side is tests/egress_allowlist.
#include <algorithm>
#include <string>

#include "backends_posix.hpp"

using namespace psych;
using conformance::for_each_backend;

namespace {

/// The terms a runtime would compute for an allowlist of `hosts`, or, for a backend that does not
/// offer one, those terms built anyway: what a caller that skips intersect_terms would send.
execution_terms allowlist_terms(const sandbox& sb, std::vector<std::string> hosts) {
  const auto offer = sb.offer();
  code_execution_request asked{.isolation = offer.isolation,
                               .limits = {.wall_seconds = 20.0},
                               .network = network_access::allowlist,
                               .allowed_hosts = hosts};
  auto decision = intersect_terms(offer, {.limits = offer.limit_ceiling}, asked, {.allowed_hosts = hosts});
  if (auto* terms = std::get_if<execution_terms>(&decision)) return *terms;
  execution_terms forced;
  forced.isolation = offer.isolation;
  forced.limits = offer.limit_ceiling;
  forced.limits.wall_seconds = 20.0;
  forced.network = network_access::allowlist;
  forced.allowed_hosts = std::move(hosts);
  return forced;
}

bool refused_with(const egress_report& report, std::string_view host, std::string_view reason) {
  return std::ranges::any_of(report.refusals,
                             [&](const egress_refusal& r) { return r.host == host && r.reason == reason; });
}

}  // namespace

TEST_CASE("network=allowlist: the program reaches psych's proxy and nothing else; elsewhere it is refused by name") {
  for_each_backend([](sandbox& sb, const auto& backend) {
    const auto offer = sb.offer();
    const auto terms = allowlist_terms(sb, {"allowed.invalid"});
    if (!offer.network_allowlist) {
      // The terms say why first, and a backend given them anyway refuses before anything runs.
      const auto decided = intersect_terms(offer, {.limits = offer.limit_ceiling},
                                           {.network = network_access::allowlist, .allowed_hosts = {"a.test"}},
                                           {.allowed_hosts = {"a.test"}});
      REQUIRE(std::holds_alternative<refusal>(decided));
      CHECK(std::get<refusal>(decided).reason == refusal_reason::network_not_granted);
      const auto r = sb.run({.program = "return 1", .terms = terms}, {});
      REQUIRE(r.failure);
      CHECK(r.failure->message.find("network=allowlist") != std::string::npos);
      CHECK_FALSE(r.isolation);
      return;
    }
    INFO(backend.name);
    const auto r = sb.run({.program = R"(
import errno, os, socket, time
seen = {"proxy": os.environ.get("HTTPS_PROXY"), "no_proxy": os.environ.get("NO_PROXY")}

def ask(request):
    start = time.monotonic()
    s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
    try:
        s.sendall(request)
        head = s.recv(4096).split(b"\r\n")[0].decode()
    finally:
        s.close()
    return head, time.monotonic() - start

seen["connect_unlisted"] = ask(b"CONNECT unlisted.invalid:443 HTTP/1.1\r\nHost: unlisted.invalid:443\r\n\r\n")
seen["http_unlisted"] = ask(b"GET http://unlisted.invalid/ HTTP/1.1\r\nHost: unlisted.invalid\r\n\r\n")
seen["connect_ip_literal"] = ask(b"CONNECT 192.0.2.1:443 HTTP/1.1\r\nHost: 192.0.2.1:443\r\n\r\n")
seen["connect_v6_literal"] = ask(b"CONNECT [2001:db8::1]:443 HTTP/1.1\r\nHost: [2001:db8::1]:443\r\n\r\n")
seen["connect_proxy_itself"] = ask(b"CONNECT 127.0.0.1:3128 HTTP/1.1\r\nHost: 127.0.0.1:3128\r\n\r\n")
seen["fronted_http"] = ask(b"GET http://allowed.invalid/ HTTP/1.1\r\nHost: unlisted.invalid\r\n\r\n")

def direct(family, address):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        return errno.errorcode.get(s.connect_ex(address), "connected")
    finally:
        s.close()

# Around the proxy: documentation addresses (never routed anywhere), and this namespace's loopback.
seen["direct_v4"] = direct(socket.AF_INET, ("192.0.2.1", 443))
seen["direct_v6"] = direct(socket.AF_INET6, ("2001:db8::1", 443))
seen["loopback_other_port"] = direct(socket.AF_INET, ("127.0.0.1", 22))
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"x", ("192.0.2.1", 53))
    seen["udp"] = "sent"
except OSError as e:
    seen["udp"] = errno.errorcode.get(e.errno, str(e.errno))
try:
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
    seen["raw"] = "opened"
except OSError as e:
    seen["raw"] = errno.errorcode.get(e.errno, str(e.errno))
try:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 8080))
    seen["bind"] = "bound"
except OSError as e:
    seen["bind"] = errno.errorcode.get(e.errno, str(e.errno))
return seen
)",
                           .terms = terms},
                          {});
    REQUIRE(r.ok());
    INFO(r.value->text);
    const auto& v = r.value->text;
    CHECK(v.find(R"("proxy":"http://127.0.0.1:3128")") != std::string::npos);
    CHECK(v.find(R"("no_proxy":"")") != std::string::npos);
    // Each refusal is an explicit 403 at once, never a hang and never a tunnel.
    for (const auto* key : {"connect_unlisted", "http_unlisted", "connect_ip_literal", "connect_v6_literal",
                            "connect_proxy_itself", "fronted_http"}) {
      INFO(key);
      const auto at = v.find(std::string("\"") + key + "\":[\"HTTP/1.1 ");
      REQUIRE(at != std::string::npos);
      // A Host that disagrees with the URL is refused as malformed or denied; the rest as denied.
      const auto status = v.substr(at + std::string(key).size() + 14, 3);
      if (std::string_view(key) == "fronted_http") CHECK(status.front() == '4');
      else CHECK(status == "403");
    }
    CHECK(v.find("connected") == std::string::npos);
    CHECK(v.find(R"("udp":"sent")") == std::string::npos);
    CHECK(v.find(R"("raw":"opened")") == std::string::npos);
    CHECK(v.find(R"("bind":"bound")") == std::string::npos);
    CHECK(r.guarantees.network == enforcement::enforced);
    REQUIRE(r.egress);
    const auto& egress = *r.egress;
    CHECK(egress.connections_allowed == 0);
    CHECK(egress.connections_refused == 6);  // the child's own probe before the program is not counted
    CHECK(refused_with(egress, "unlisted.invalid", "http_request_denied"));
    CHECK(refused_with(egress, "192.0.2.1", "http_request_denied"));
    CHECK(refused_with(egress, "127.0.0.1", "http_request_denied"));
  });
}
