#include <doctest/doctest.h>

#include <limits>

#include "psych/limits.hpp"

using namespace psych;

TEST_CASE("each dimension narrows to the smaller value, generically") {
  SUBCASE("a cap narrows by a smaller cap and ignores a larger one") {
    sandbox_limits current;  // spec defaults
    narrow(current, sandbox_limits{.cpu_seconds = 2.0, .address_space_bytes = std::uint64_t{1} << 40,
                                   .file_size_bytes = 1024, .process_count = 500, .wall_seconds = 5.0});
    CHECK(current.cpu_seconds.value == 2.0);
    CHECK(current.address_space_bytes.value == std::uint64_t{512} << 20);
    CHECK(current.file_size_bytes.value == 1024);
    CHECK(current.process_count.value == 64);
    CHECK(current.wall_seconds.value == 5.0);
  }
  SUBCASE("an absent request leaves the cap alone") {
    sandbox_limits current;
    narrow(current, code_execution_limits{});
    CHECK(current == sandbox_limits{});
  }
  SUBCASE("a request narrows, memory_bytes lining up with address_space_bytes") {
    sandbox_limits current;
    narrow(current, code_execution_limits{.memory_bytes = std::uint64_t{64} << 20, .process_count = 8});
    CHECK(current.address_space_bytes.value == std::uint64_t{64} << 20);
    CHECK(current.process_count.value == 8);
    CHECK(current.wall_seconds.value == 30.0);
  }
  SUBCASE("a request can never widen") {
    sandbox_limits current{.wall_seconds = 10.0};
    narrow(current, code_execution_limits{.wall_seconds = 60.0});
    CHECK(current.wall_seconds.value == 10.0);
  }
}

TEST_CASE("caps narrow only the dimensions they set") {
  SUBCASE("an unset cap narrows nothing") {
    sandbox_limits current{.cpu_seconds = 99.0, .wall_seconds = 300.0};
    narrow(current, limit_caps{});
    CHECK(current == sandbox_limits{.cpu_seconds = 99.0, .wall_seconds = 300.0});
  }
  SUBCASE("a set cap narrows its dimension, and never widens it") {
    sandbox_limits current{.cpu_seconds = 99.0, .process_count = 500, .wall_seconds = 300.0};
    narrow(current, limit_caps{.process_count = 8, .wall_seconds = 1000.0});
    CHECK(current.process_count.value == 8);
    CHECK(current.wall_seconds.value == 300.0);
    CHECK(current.cpu_seconds.value == 99.0);  // not the 10 s sandbox_limits would default to
  }
  SUBCASE("overlay replaces the set dimensions, up or down, and keeps the rest") {
    const sandbox_limits base{.cpu_seconds = 10.0, .wall_seconds = 30.0};
    const auto laid = overlay(base, limit_caps{.address_space_bytes = std::uint64_t{64} << 20, .wall_seconds = 120.0});
    CHECK(laid.wall_seconds.value == 120.0);
    CHECK(laid.address_space_bytes.value == std::uint64_t{64} << 20);
    CHECK(laid.cpu_seconds.value == 10.0);
    CHECK(laid.file_size_bytes == base.file_size_bytes);
    CHECK(overlay(base, limit_caps{}) == base);
  }
  SUBCASE("overlay of caps on caps: the later set dimensions win") {
    const auto merged = overlay(limit_caps{.cpu_seconds = 5.0, .wall_seconds = 9.0}, limit_caps{.wall_seconds = 3.0});
    CHECK(merged == limit_caps{.cpu_seconds = 5.0, .wall_seconds = 3.0});
  }
  SUBCASE("validation looks only at the set caps") {
    CHECK(validate_limits(limit_caps{}).has_value());
    CHECK(validate_limits(limit_caps{.wall_seconds = 2.0}).has_value());
    auto r = validate_limits(limit_caps{.file_size_bytes = std::uint64_t{0}});
    REQUIRE(r.has_error());
    CHECK(r.error().detail.find("file_size_bytes") != std::string::npos);
  }
  SUBCASE("a cap's field measures the dimension of the sandbox_limits field it mirrors") {
    CHECK(dimension_of_field<limit_caps>("address_space_bytes") == limit_name::memory_bytes);
    CHECK(dimension_of_field<limit_caps>("wall_seconds") == limit_name::wall_seconds);
  }
}

namespace {
struct two_limits {
  cap<limit_name::cpu_seconds, double> cpu_seconds = 1.0;
  cap<limit_name::wall_seconds, double> wall_seconds = 1.0;
};
struct two_caps {
  std::optional<cap<limit_name::cpu_seconds, double>> cpu_seconds;
  std::optional<cap<limit_name::wall_seconds, double>> wall_seconds;
};
struct one_cap {
  std::optional<cap<limit_name::cpu_seconds, double>> cpu_seconds;
};
struct misnamed_caps {
  std::optional<cap<limit_name::cpu_seconds, double>> cpu_seconds;
  std::optional<cap<limit_name::wall_seconds, double>> wall_clock;
};
struct not_optional_caps {
  std::optional<cap<limit_name::cpu_seconds, double>> cpu_seconds;
  cap<limit_name::wall_seconds, double> wall_seconds = 1.0;
};
}  // namespace
BOOST_HANA_ADAPT_STRUCT(two_limits, cpu_seconds, wall_seconds);
BOOST_HANA_ADAPT_STRUCT(two_caps, cpu_seconds, wall_seconds);
BOOST_HANA_ADAPT_STRUCT(one_cap, cpu_seconds);
BOOST_HANA_ADAPT_STRUCT(misnamed_caps, cpu_seconds, wall_clock);
BOOST_HANA_ADAPT_STRUCT(not_optional_caps, cpu_seconds, wall_seconds);

TEST_CASE("a caps struct must mirror its limits struct member for member, optional") {
  CHECK(mirrors_optionally<sandbox_limits, limit_caps>());
  CHECK(mirrors_optionally<two_limits, two_caps>());
  CHECK_FALSE(mirrors_optionally<two_limits, one_cap>());          // a dimension missing
  CHECK_FALSE(mirrors_optionally<two_limits, misnamed_caps>());    // a dimension under another name
  CHECK_FALSE(mirrors_optionally<two_limits, not_optional_caps>());  // a cap that cannot be unset
  CHECK_FALSE(mirrors_optionally<sandbox_limits, code_execution_limits>());  // requests are not caps
}

TEST_CASE("the wall clock always applies") {
  sandbox_limits defaults;
  CHECK(defaults.wall_seconds.value == 30.0);
  CHECK(dimension_of_field<sandbox_limits>("wall_seconds") == limit_name::wall_seconds);
  CHECK(dimension_of_field<sandbox_limits>("address_space_bytes") == limit_name::memory_bytes);
  CHECK(dimension_of_field<code_execution_limits>("memory_bytes") == limit_name::memory_bytes);
  CHECK_FALSE(dimension_of_field<sandbox_limits>("nonsense").has_value());
}

TEST_CASE("limits must be positive and finite, and the error names the field") {
  CHECK(validate_limits(sandbox_limits{}).has_value());
  SUBCASE("negative") {
    auto r = validate_limits(sandbox_limits{.cpu_seconds = -1.0});
    REQUIRE(r.has_error());
    CHECK(r.error().kind == error_kind::invalid_limit);
    CHECK(r.error().detail.find("cpu_seconds") != std::string::npos);
  }
  SUBCASE("zero") {
    CHECK(validate_limits(sandbox_limits{.process_count = std::uint64_t{0}}).has_error());
  }
  SUBCASE("NaN and infinity") {
    CHECK(validate_limits(sandbox_limits{.wall_seconds = std::numeric_limits<double>::quiet_NaN()}).has_error());
    CHECK(validate_limits(sandbox_limits{.wall_seconds = std::numeric_limits<double>::infinity()}).has_error());
  }
  SUBCASE("requests too, when present") {
    CHECK(validate_limits(code_execution_limits{}).has_value());
    auto r = validate_limits(code_execution_limits{.memory_bytes = std::uint64_t{0}});
    REQUIRE(r.has_error());
    CHECK(r.error().detail.find("memory_bytes") != std::string::npos);
  }
}

TEST_CASE("enum spellings round-trip and reject unknowns") {
  CHECK(name_of(limit_name::file_size_bytes) == "file_size_bytes");
  CHECK(parse_enum<limit_name>("process_count") == limit_name::process_count);
  CHECK_FALSE(parse_enum<limit_name>("PROCESS_COUNT").has_value());
  CHECK(name_of(error_kind::json_duplicate_key) == "json_duplicate_key");
}
