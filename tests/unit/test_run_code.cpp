// Which tools a program may call this turn: the Spec's list narrows the catalogue, never widens it,
// and a listed name that resolves to nothing is reported, never replaced.
#include <doctest/doctest.h>

#include "psych/host/run_code.hpp"

using namespace psych;

namespace {
std::vector<std::string> names(const std::vector<binding>& bindings) {
  std::vector<std::string> out;
  for (const auto& b : bindings) out.push_back(b.name);
  return out;
}
}  // namespace

TEST_CASE("no list: every tool of the catalogue, sorted, each once") {
  const auto turn = resolve_bindings({{"b", ""}, {"a", ""}, {"b", "again"}}, std::nullopt);
  CHECK(names(turn.offered) == std::vector<std::string>{"a", "b"});
  CHECK(turn.unavailable.empty());
}

TEST_CASE("a list narrows; what no longer resolves is unavailable and never replaced by a lookalike") {
  const auto turn = resolve_bindings({{"list_repos", ""}, {"list-repos", ""}, {"echo", ""}},
                                     std::vector<std::string>{"list_repos", "lookup", "zeta", "lookup"});
  CHECK(names(turn.offered) == std::vector<std::string>{"list_repos"});
  CHECK(turn.unavailable == std::vector<std::string>{"lookup", "zeta"});
}

TEST_CASE("the runtime's built-ins are never unavailable: callable ones are always reachable") {
  const auto turn = resolve_bindings({{"echo", ""}}, std::vector<std::string>{"list_tools", "get_tool_info", "echo"});
  CHECK(names(turn.offered) == std::vector<std::string>{"echo"});
  CHECK(turn.unavailable.empty());
}

TEST_CASE("an empty list offers nothing") {
  const auto turn = resolve_bindings({{"echo", ""}}, std::vector<std::string>{});
  CHECK(turn.offered.empty());
  CHECK(turn.unavailable.empty());
}
