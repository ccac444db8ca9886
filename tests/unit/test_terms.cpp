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
  const profile_caps capped{.hard_limits = sandbox_limits{.wall_seconds = 10.0}};
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
  const profile_caps profile{.hard_limits = sandbox_limits{.cpu_seconds = 4.0, .process_count = 32}};
  auto t = expect_terms(intersect_terms(backend, policy, spec, profile));
  CHECK(t.limits.cpu_seconds.value == 4.0);                           // the profile's cap, lowest
  CHECK(t.limits.address_space_bytes.value == std::uint64_t{1} << 20);  // the spec's request
  CHECK(t.limits.process_count.value == 16);                          // the policy's grant
  CHECK(t.limits.wall_seconds.value == 20.0);                         // the backend's ceiling
  CHECK(t.network == network_access::none);
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
