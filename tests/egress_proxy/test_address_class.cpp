// Which addresses the egress proxy refuses to reach on a name's behalf (src/host/egress/
// address_class.hpp): every range by name, IPv4 carried inside IPv6 by the IPv4 it reaches, and the
// documentation ranges the tests' fake internet stands on left public.
#include <doctest/doctest.h>

#include "egress/address_class.hpp"

using boost::asio::ip::make_address;
using psych::host::egress::address_class;
using psych::host::egress::classify;
using psych::host::egress::vet;

namespace {

address_class class_of(const char* text) { return classify(make_address(text)); }

void check_all(std::initializer_list<const char*> addresses, address_class expected) {
  for (const char* address : addresses) {
    CAPTURE(address);
    CHECK(class_of(address) == expected);
  }
}

}  // namespace

TEST_CASE("address_class: the host itself, its networks and the metadata service are never public") {
  SUBCASE("loopback") { check_all({"127.0.0.1", "127.255.255.254", "::1"}, address_class::loopback); }
  SUBCASE("unspecified") { check_all({"0.0.0.0", "0.1.2.3", "::"}, address_class::unspecified); }
  SUBCASE("private") {
    check_all(
        {"10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.255", "192.168.1.1", "100.64.0.1", "100.127.255.255",
         "198.18.0.1", "198.19.255.255", "fc00::1", "fd00::1", "fdff:ffff::1", "fec0::1", "64:ff9b:1::a00:1"},
        address_class::private_use);
  }
  SUBCASE("link-local, the metadata address among them") {
    check_all({"169.254.169.254", "169.254.0.1", "fe80::1", "febf::1"}, address_class::link_local);
  }
  SUBCASE("multicast") { check_all({"224.0.0.1", "239.255.255.255", "ff02::1", "ff0e::1"}, address_class::multicast); }
  SUBCASE("reserved and broadcast") { check_all({"240.0.0.1", "255.255.255.255", "100::1"}, address_class::reserved); }
}

TEST_CASE("address_class: the edges of each range stay outside it") {
  check_all({"9.255.255.255", "11.0.0.0", "172.15.255.255", "172.32.0.0", "192.167.255.255", "192.169.0.0",
             "100.63.255.255", "100.128.0.0", "169.253.255.255", "169.255.0.0", "198.17.255.255", "198.20.0.0",
             "223.255.255.255", "1.1.1.1", "8.8.8.8", "fbff::1", "fe00::1", "2606:4700::1111", "100:0:0:1::1"},
            address_class::public_address);
}

TEST_CASE("address_class: the documentation ranges are public (the tests' fake internet)") {
  check_all({"192.0.2.1", "198.51.100.7", "203.0.113.200", "2001:db8::1", "2001:db8:ffff::1"},
            address_class::public_address);
}

TEST_CASE("address_class: IPv4 inside IPv6 is the class of the IPv4 it reaches") {
  struct carried {
    const char* address;
    address_class expected;
  };
  const carried cases[] = {
      // mapped ::ffff:0:0/96
      {"::ffff:127.0.0.1", address_class::loopback},
      {"::ffff:169.254.169.254", address_class::link_local},
      {"::ffff:10.1.2.3", address_class::private_use},
      {"::ffff:192.0.2.1", address_class::public_address},
      // translated ::ffff:0:0:0/96
      {"::ffff:0:7f00:1", address_class::loopback},
      // compatible ::/96
      {"::127.0.0.1", address_class::loopback},
      {"::10.0.0.1", address_class::private_use},
      {"::192.0.2.1", address_class::public_address},
      // NAT64 64:ff9b::/96
      {"64:ff9b::127.0.0.1", address_class::loopback},
      {"64:ff9b::a9fe:a9fe", address_class::link_local},
      {"64:ff9b::192.0.2.1", address_class::public_address},
      // 6to4 2002::/16
      {"2002:7f00:1::", address_class::loopback},
      {"2002:a9fe:a9fe::1", address_class::link_local},
      {"2002:c000:201::1", address_class::public_address},
      // Teredo 2001::/32: the client address with every bit flipped (80ff:fffe is 127.0.0.1)
      {"2001:0:4136:e378:8000:63bf:80ff:fffe", address_class::loopback},
      {"2001:0:4136:e378:8000:63bf:3f3f:fdfe", address_class::public_address},  // 192.192.2.1
  };
  for (const auto& [address, expected] : cases) check_all({address}, expected);
}

TEST_CASE("vet: the permitted addresses in the answer's order, the others named with their classes") {
  const std::vector answer{make_address("10.0.0.1"), make_address("192.0.2.1"), make_address("127.0.0.1"),
                           make_address("2001:db8::5")};
  SUBCASE("without a fake internet") {
    const auto vetted = vet(answer, {});
    CHECK(vetted.permitted == std::vector{make_address("192.0.2.1"), make_address("2001:db8::5")});
    CHECK(vetted.refused == "10.0.0.1 (private), 127.0.0.1 (loopback)");
  }
  SUBCASE("a test's fake internet on loopback") {
    const std::vector fake{make_address("127.0.0.1")};
    const auto vetted = vet(answer, fake);
    CHECK(vetted.permitted.size() == 3);
    CHECK(vetted.refused == "10.0.0.1 (private)");
  }
  SUBCASE("nothing permitted") {
    const std::vector rebound{make_address("127.0.0.1"), make_address("::ffff:169.254.169.254")};
    const auto vetted = vet(rebound, {});
    CHECK(vetted.permitted.empty());
    CHECK(vetted.refused == "127.0.0.1 (loopback), ::ffff:169.254.169.254 (link-local)");
  }
}
