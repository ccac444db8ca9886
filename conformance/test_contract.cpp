// One program per execution, no state between executions, failures and
// values as data.
#include <filesystem>

#include "backends.hpp"

using namespace psych;
using conformance::for_each_backend;

TEST_CASE("the workspace is fresh and empty every time, and nothing carries over") {
  for_each_backend([](sandbox& sb, const auto&) {
    const char* leave_state = R"(
import os
before = sorted(os.listdir("."))
with open("state.txt", "w") as f:
    f.write("left behind")
import builtins
builtins.psych_leftover = 1
return {"before": before, "cwd_is_home": os.path.samefile(os.getcwd(), os.environ["HOME"]),
        "tmp": sorted(os.listdir(os.environ["TMPDIR"]))}
)";
    const auto first = conformance::run(sb, leave_state);
    REQUIRE_MESSAGE(first.ok(), first.failure->message);
    CHECK(first.value->text == R"({"before":[],"cwd_is_home":true,"tmp":[]})");
    const auto second = conformance::run(sb, R"(
import os, builtins
return {"files": sorted(os.listdir(".")), "leftover": hasattr(builtins, "psych_leftover")}
)");
    REQUIRE(second.ok());
    CHECK(second.value->text == R"({"files":[],"leftover":false})");
  });
}

TEST_CASE("a credential in the host's environment never reaches the child") {
  conformance::set_host_variable("PSYCH_CONFORMANCE_SECRET_TOKEN", "hunter2-credential");
  for_each_backend([](sandbox& sb, const auto&) {
    const auto r = conformance::run(sb, "import os\nreturn sorted(os.environ.items())");
    REQUIRE(r.ok());
    CHECK(r.value->text.find("PSYCH_CONFORMANCE_SECRET_TOKEN") == std::string::npos);
    CHECK(r.value->text.find("hunter2") == std::string::npos);
    CHECK(r.guarantees.environment == enforcement::enforced);
  });
  SUBCASE("an allowlisted variable does reach it") {
    auto allowing = conformance::backends().front();
    allowing.options.env_allowlist = {"PSYCH_CONFORMANCE_SECRET_TOKEN"};
    if (auto sb = conformance::sandbox_or_skip(allowing)) {
      const auto r = conformance::run(*sb, "import os\nreturn os.environ.get('PSYCH_CONFORMANCE_SECRET_TOKEN')");
      CHECK(r.value->text == R"("hunter2-credential")");
    }
  }
  conformance::set_host_variable("PSYCH_CONFORMANCE_SECRET_TOKEN", std::nullopt);
}

TEST_CASE("a traceback comes back as data, with the program's own line numbers") {
  for_each_backend([](sandbox& sb, const auto&) {
    const auto r = conformance::run(sb, "x = 1\nprint('before')\ndef f():\n    return {}['missing']\nf()\n");
    REQUIRE(r.failure);
    CHECK(r.failure->kind == failure_kind::exception);
    CHECK(r.failure->message.find("KeyError") != std::string::npos);
    CHECK(r.failure->line == 4);
    CHECK(r.failure->traceback.find("line 5") != std::string::npos);
    CHECK(r.failure->traceback.find("line 4") != std::string::npos);
    CHECK(r.failure->traceback.find("<program>") != std::string::npos);
    CHECK(r.failure->traceback.find("bootstrap") == std::string::npos);
    CHECK(r.stdout_data == "before\n");
    CHECK_FALSE(r.limit_hit);
  });
}

TEST_CASE("a SyntaxError comes back as data with its line") {
  for_each_backend([](sandbox& sb, const auto&) {
    const auto r = conformance::run(sb, "a = 1\nb = (2,\nprint('never')\nreturn a +\n");
    REQUIRE(r.failure);
    CHECK(r.failure->kind == failure_kind::syntax_error);
    CHECK(r.failure->line >= 2);
    CHECK(r.stdout_size == 0);
  });
}

TEST_CASE("values round-trip: nested JSON, unicode, big integers; None is no value") {
  for_each_backend([](sandbox& sb, const auto&) {
    SUBCASE("nested") {
      const auto r = conformance::run(sb, R"(return {"a": [1, 2.5, None, True, {"b": "c"}], "n": -7})");
      REQUIRE(r.ok());
      CHECK(r.value->text == R"({"a":[1,2.5,null,true,{"b":"c"}],"n":-7})");
    }
    SUBCASE("unicode") {
      const auto r = conformance::run(sb, "'héllo wörld ✓ 😀'");
      REQUIRE(r.ok());
      CHECK(r.value->text == "\"héllo wörld ✓ 😀\"");
    }
    SUBCASE("big integers survive exactly") {
      const auto r = conformance::run(sb, "return [2**200, -(10**40)]");
      REQUIRE(r.ok());
      CHECK(r.value->text ==
            "[1606938044258990275541962092341162602522202993782792835301376,-10000000000000000000000000000000000000000]");
    }
    SUBCASE("top-level await") {
      const auto r = conformance::run(sb, "import asyncio\nawait asyncio.sleep(0)\nreturn 'awaited'");
      REQUIRE(r.ok());
      CHECK(r.value->text == "\"awaited\"");
    }
    SUBCASE("None and no value at all are both no value") {
      const auto none = conformance::run(sb, "return None");
      const auto nothing = conformance::run(sb, "x = 1");
      CHECK(none.ok());
      CHECK(nothing.ok());
      CHECK_FALSE(none.value);
      CHECK_FALSE(nothing.value);
    }
    SUBCASE("a value JSON cannot carry is a clear failure") {
      const auto r = conformance::run(sb, "return {1, 2}");
      REQUIRE(r.failure);
      CHECK(r.failure->kind == failure_kind::value_not_serializable);
      CHECK(r.failure->message.find("set") != std::string::npos);
    }
  });
}

TEST_CASE("a program asking for more isolation than the backend reached is never run") {
  for_each_backend([](sandbox& sb, const auto& backend) {
    if (backend.options.isolation == isolation_level::isolated) return;  // it does reach isolated
    // A sticky world-writable directory the child could write to if it ran (owned by the suite,
    // so the host's sweep of the child's own entries leaves it).
    const std::string markers = conformance::make_scratch_directory("psych-conformance-markers-");
    std::error_code ignored;  // as ::chmod was: a mode not taken leaves the child less to write to
    std::filesystem::permissions(markers, std::filesystem::perms::all | std::filesystem::perms::sticky_bit, ignored);
    // Forward slashes: a Python literal on Windows too, where a backslash would begin an escape.
    const std::string marker = std::filesystem::path(markers + "/ran").generic_string();
    auto terms = conformance::terms_for(sb);
    terms.isolation = isolation_level::isolated;  // as a caller that skipped intersect_terms would
    const auto r = sb.run({.program = "open('" + marker + "', 'w').write('ran')\nprint('ran')", .terms = terms});
    REQUIRE(r.failure);
    CHECK(r.failure->kind == failure_kind::isolation_unavailable);
    CHECK(r.stdout_size == 0);
    CHECK_FALSE(std::filesystem::exists(marker));
    CHECK(r.isolation == isolation_level::process);
    std::filesystem::remove_all(markers);
  });
}
