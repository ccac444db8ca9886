// The CLI's config file (apps/psych/config.cpp): its limit_ceiling is caps, one member at a time.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "config.hpp"
#include "temp_dir.hpp"

using namespace psych;

namespace {

result<local_sandbox_options> load(const std::string& text, local_sandbox_options base = {}) {
  psych::testing::temp_dir dir("psych-config");
  const std::string path = dir.file("psych.json");
  std::ofstream(path) << text;
  return cli::load_config(path, std::move(base));
}

}  // namespace

TEST_CASE("config: limit_ceiling sets only the members it names") {
  SUBCASE("one member: the others stay unset, so the backend keeps its built-in ceiling there") {
    const auto options = load(R"({"limit_ceiling": {"wall_seconds": 120}})");
    REQUIRE(options);
    CHECK(options.value().limit_ceiling == limit_caps{.wall_seconds = 120.0});
    const auto ceiling = overlay(local_builtin_ceiling, options.value().limit_ceiling);
    CHECK(ceiling.wall_seconds.value == 120.0);
    CHECK(ceiling.cpu_seconds == local_builtin_ceiling.cpu_seconds);
    CHECK(ceiling.address_space_bytes == local_builtin_ceiling.address_space_bytes);
  }
  SUBCASE("absent altogether, or empty: nothing set") {
    CHECK(load("{}").value().limit_ceiling == limit_caps{});
    CHECK(load(R"({"limit_ceiling": {}})").value().limit_ceiling == limit_caps{});
  }
  SUBCASE("the file's members win over the caller's, member by member") {
    const auto options =
        load(R"({"limit_ceiling": {"process_count": 8}})", {.limit_ceiling = {.cpu_seconds = 3.0, .process_count = 99}});
    REQUIRE(options);
    CHECK(options.value().limit_ceiling == limit_caps{.cpu_seconds = 3.0, .process_count = 8});
  }
  SUBCASE("a bad value names its member") {
    const auto bad = load(R"({"limit_ceiling": {"cpu_seconds": 0}})");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().kind == error_kind::invalid_limit);
    CHECK(bad.error().detail.find("limit_ceiling.cpu_seconds") != std::string::npos);
  }
}

TEST_CASE("config: a member psych does not know is an error, never silently ignored") {
  SUBCASE("the old name of the ceiling") {
    const auto old = load(R"({"default_limits": {"wall_seconds": 5}})");
    REQUIRE_FALSE(old);
    CHECK(old.error().kind == error_kind::frame_unknown_member);
    CHECK(old.error().detail.find("default_limits") != std::string::npos);
  }
  SUBCASE("a misspelt dimension inside the ceiling") {
    const auto typo = load(R"({"limit_ceiling": {"memory_bytes": 1048576}})");
    REQUIRE_FALSE(typo);
    CHECK(typo.error().kind == error_kind::frame_unknown_member);
    CHECK(typo.error().detail.find("limit_ceiling.memory_bytes") != std::string::npos);
  }
}

TEST_CASE("config: pool sets the prepared sandboxes of psych serve, within bounds") {
  const auto pooled = load(R"({"pool": {"size": 4, "max_age_seconds": 120}})");
  REQUIRE(pooled);
  CHECK(pooled.value().pool.size == 4);
  CHECK(pooled.value().pool.max_age_seconds == 120);
  const auto absent = load(R"({})");
  REQUIRE(absent);
  CHECK(absent.value().pool.size == 0);  // off unless asked for
  for (const auto* bad : {R"({"pool": {"size": -1}})", R"({"pool": {"size": 65}})",
                          R"({"pool": {"max_age_seconds": 0}})", R"({"pool": {"sizes": 2}})"}) {
    INFO(bad);
    CHECK_FALSE(load(bad));
  }
}
