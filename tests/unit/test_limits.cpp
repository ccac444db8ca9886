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
