#include <doctest/doctest.h>

#include "psych/terms.hpp"

using namespace psych;

namespace {

backend_offer ready_backend(isolation_level level = isolation_level::process, bool network = false) {
  return {.ready = true, .isolation = level, .limit_ceiling = {}, .network = network};
}

execution_terms expect_terms(const terms_decision& d) {
  REQUIRE(std::holds_alternative<execution_terms>(d));
  return std::get<execution_terms>(d);
}

refusal expect_refusal(const terms_decision& d) {
  REQUIRE(std::holds_alternative<refusal>(d));
  return std::get<refusal>(d);
}

}  // namespace

TEST_CASE("the spec's examples") {
  const profile_caps capped{.hard_limits = {.wall_seconds = 10.0}};
  SUBCASE("a deployment cap of 10 wall seconds and an agent asking for 60 gives 10") {
    auto t = expect_terms(intersect_terms(ready_backend(), {}, {.limits = {.wall_seconds = 60.0}}, capped));
    CHECK(t.limits.wall_seconds.value == 10.0);
  }
  SUBCASE("an agent asking for 5 gives 5") {
    auto t = expect_terms(intersect_terms(ready_backend(), {}, {.limits = {.wall_seconds = 5.0}}, capped));
    CHECK(t.limits.wall_seconds.value == 5.0);
  }
  SUBCASE("allow_network=false on the profile and network=unrestricted in the spec gives a refusal") {
    auto r = expect_refusal(intersect_terms(ready_backend(isolation_level::process, true), {.allow_network = true},
                                            {.network = network_access::unrestricted},
                                            {.allow_network = false}));
    CHECK(r.reason == refusal_reason::network_not_granted);
    CHECK(r.message.find("profile") != std::string::npos);
  }
}

TEST_CASE("the four terms narrow in order and none can widen") {
  const backend_offer backend{.ready = true, .limit_ceiling = {.cpu_seconds = 8.0, .wall_seconds = 20.0}};
  const code_execution_grant policy{.limits = {.cpu_seconds = 6.0, .process_count = 16}};
  const code_execution_request spec{.limits = {.cpu_seconds = 100.0, .memory_bytes = std::uint64_t{1} << 20}};
  const profile_caps profile{.hard_limits = {.cpu_seconds = 4.0, .process_count = 32}};
  auto t = expect_terms(intersect_terms(backend, policy, spec, profile));
  CHECK(t.limits.cpu_seconds.value == 4.0);                           // the profile's cap, lowest
  CHECK(t.limits.address_space_bytes.value == std::uint64_t{1} << 20);  // the spec's request
  CHECK(t.limits.process_count.value == 16);                          // the policy's grant
  CHECK(t.limits.wall_seconds.value == 20.0);                         // the backend's ceiling
  CHECK(t.network == network_access::none);
}

namespace {

/// A backend whose ceiling is above sandbox_limits' defaults in every dimension, so a cap that
/// silently fell back to those defaults would show.
backend_offer generous_backend() {
  return {.ready = true,
          .limit_ceiling = {.cpu_seconds = 100.0,
                            .address_space_bytes = std::uint64_t{8} << 30,
                            .file_size_bytes = std::uint64_t{1} << 30,
                            .process_count = 1000,
                            .wall_seconds = 600.0}};
}

}  // namespace

TEST_CASE("a profile's hard limits cap only the dimensions they set") {
  const auto backend = generous_backend();
  const code_execution_grant everything{.limits = backend.limit_ceiling};
  SUBCASE("a profile that sets only the wall clock leaves the rest to the spec, up to the backend's ceiling") {
    const profile_caps wall_only{.hard_limits = {.wall_seconds = 120.0}};
    auto asked = expect_terms(intersect_terms(
        backend, everything,
        {.limits = {.cpu_seconds = 50.0, .memory_bytes = std::uint64_t{2} << 30, .wall_seconds = 300.0}}, wall_only));
    CHECK(asked.limits.cpu_seconds.value == 50.0);
    CHECK(asked.limits.address_space_bytes.value == std::uint64_t{2} << 30);
    CHECK(asked.limits.wall_seconds.value == 120.0);
    auto silent = expect_terms(intersect_terms(backend, everything, {}, wall_only));
    CHECK(silent.limits.cpu_seconds.value == 100.0);
    CHECK(silent.limits.address_space_bytes.value == std::uint64_t{8} << 30);
    CHECK(silent.limits.file_size_bytes.value == std::uint64_t{1} << 30);
    CHECK(silent.limits.process_count.value == 1000);
    CHECK(silent.limits.wall_seconds.value == 120.0);
    auto beyond = expect_terms(intersect_terms(backend, everything, {.limits = {.cpu_seconds = 1000.0}}, wall_only));
    CHECK(beyond.limits.cpu_seconds.value == 100.0);  // the backend's ceiling still holds
  }
  SUBCASE("no hard limits at all: the terms are the backend's, the policy's and the spec's") {
    auto t = expect_terms(intersect_terms(backend, everything, {}, {}));
    CHECK(t.limits == backend.limit_ceiling);
  }
  SUBCASE("each set cap narrows its own dimension, and only a smaller one") {
    const auto capped_in = [&](const limit_caps& caps) {
      return expect_terms(intersect_terms(backend, everything, {}, {.hard_limits = caps})).limits;
    };
    CHECK(capped_in({.cpu_seconds = 7.0}) == overlay(backend.limit_ceiling, limit_caps{.cpu_seconds = 7.0}));
    CHECK(capped_in({.address_space_bytes = std::uint64_t{1} << 20}).address_space_bytes.value ==
          std::uint64_t{1} << 20);
    CHECK(capped_in({.file_size_bytes = 4096}).file_size_bytes.value == 4096);
    CHECK(capped_in({.process_count = 3}).process_count.value == 3);
    CHECK(capped_in({.wall_seconds = 2.0}).wall_seconds.value == 2.0);
    CHECK(capped_in({.cpu_seconds = 1e6, .wall_seconds = 1e6}) == backend.limit_ceiling);  // a cap never widens
  }
}

TEST_CASE("refusals are data, each naming its reason") {
  SUBCASE("a backend that is not ready") {
    backend_offer broken{.ready = false, .problems = {"launcher missing"}};
    auto r = expect_refusal(intersect_terms(broken, {}, {}, {}));
    CHECK(r.reason == refusal_reason::backend_not_ready);
    CHECK(r.message.find("launcher missing") != std::string::npos);
  }
  SUBCASE("an isolation level the backend cannot reach") {
    auto r = expect_refusal(intersect_terms(ready_backend(), {}, {.isolation = isolation_level::isolated}, {}));
    CHECK(r.reason == refusal_reason::isolation_unreachable);
  }
  SUBCASE("network denied by each of backend, policy and profile") {
    const code_execution_request asks{.network = network_access::unrestricted};
    CHECK(expect_refusal(intersect_terms(ready_backend(), {.allow_network = true}, asks, {.allow_network = true}))
              .message.find("backend") != std::string::npos);
    CHECK(expect_refusal(intersect_terms(ready_backend(isolation_level::process, true), {.allow_network = false},
                                         asks, {.allow_network = true}))
              .message.find("tenant policy") != std::string::npos);
  }
  SUBCASE("network granted only when all four agree") {
    auto t = expect_terms(intersect_terms(ready_backend(isolation_level::process, true), {.allow_network = true},
                                          {.network = network_access::unrestricted}, {.allow_network = true}));
    CHECK(t.network == network_access::unrestricted);
  }
}

TEST_CASE("asking for less isolation than the backend reaches is fine; the minimum is kept") {
  auto t = expect_terms(intersect_terms(ready_backend(isolation_level::isolated), {}, {}, {}));
  CHECK(t.isolation == isolation_level::process);
}

TEST_CASE("network=allowlist: the hosts the profile, the policy and the spec all allow") {
  const backend_offer isolated{.ready = true, .isolation = isolation_level::isolated, .network_allowlist = true};
  const code_execution_request spec{.isolation = isolation_level::isolated,
                                    .network = network_access::allowlist,
                                    .allowed_hosts = {"api.example.com", "*.cdn.example.com", "other.test:8443"}};
  const profile_caps profile{.allowed_hosts = {"*.example.com", "other.test:8443"}};
  SUBCASE("the spec's patterns narrowed by the profile's; the offered grant leaves hosts alone") {
    auto t = expect_terms(intersect_terms(isolated, {}, spec, profile));
    CHECK(t.network == network_access::allowlist);
    CHECK(t.allowed_hosts == std::vector<std::string>{"api.example.com", "*.cdn.example.com", "other.test:8443"});
  }
  SUBCASE("a policy's list narrows further") {
    auto t = expect_terms(intersect_terms(isolated, {.allowed_hosts = std::vector<std::string>{"API.example.com."}},
                                          spec, profile));
    CHECK(t.allowed_hosts == std::vector<std::string>{"api.example.com"});
  }
  SUBCASE("a profile that allows every host (allow_network) leaves the spec's list") {
    auto t = expect_terms(intersect_terms(isolated, {}, spec, {.allow_network = true}));
    CHECK(t.allowed_hosts.size() == 3);
  }
  SUBCASE("nothing shared is a refusal naming who left nothing") {
    auto r = expect_refusal(intersect_terms(isolated, {.allowed_hosts = std::vector<std::string>{"elsewhere.test"}},
                                            spec, profile));
    CHECK(r.reason == refusal_reason::network_not_granted);
    CHECK(r.message.find("tenant policy") != std::string::npos);
    r = expect_refusal(intersect_terms(isolated, {}, spec, {}));
    CHECK(r.message.find("the profile") != std::string::npos);
  }
  SUBCASE("a wildcard in the profile never widens an exact name in the spec") {
    auto t = expect_terms(intersect_terms(isolated, {}, {.isolation = isolation_level::isolated,
                                                         .network = network_access::allowlist,
                                                         .allowed_hosts = {"api.example.com:443"}},
                                          {.allowed_hosts = {"*.example.com"}}));
    CHECK(t.allowed_hosts == std::vector<std::string>{"api.example.com:443"});
  }
  SUBCASE("a pattern that does not parse, or none at all, is refused") {
    auto bad = spec;
    bad.allowed_hosts = {"*.com"};
    CHECK(expect_refusal(intersect_terms(isolated, {}, bad, profile)).message.find("*.com") != std::string::npos);
    bad.allowed_hosts.clear();
    CHECK(expect_refusal(intersect_terms(isolated, {}, bad, profile)).message.find("names no host") !=
          std::string::npos);
  }
  SUBCASE("a backend that cannot hold it refuses, and PROCESS says why") {
    auto r = expect_refusal(intersect_terms(ready_backend(isolation_level::process, true), {.allow_network = true},
                                            {.network = network_access::allowlist, .allowed_hosts = {"a.test"}},
                                            {.allow_network = true}));
    CHECK(r.reason == refusal_reason::network_not_granted);
    CHECK(r.message.find("isolation=process") != std::string::npos);
  }
  SUBCASE("terms computed elsewhere are checked again against the backend") {
    auto t = expect_terms(intersect_terms(isolated, {}, spec, profile));
    CHECK_FALSE(refusal_by_backend(isolated, t));
    CHECK(refusal_by_backend(ready_backend(isolation_level::isolated), t));
    t.allowed_hosts = {"*"};
    CHECK(refusal_by_backend(isolated, t));
  }
}
