// The core's half of program bindings: the closed ToolError kinds, the built-ins table and the
// binding budget's narrowing and metering. Pure; the bootstrap and the host build on these.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "psych/budget.hpp"
#include "psych/builtins.hpp"
#include "psych/tool_errors.hpp"

using namespace psych;

TEST_CASE("every ToolError kind has a spelling that parses back and its own sentence for authors") {
  std::set<std::string_view> sentences;
  for (std::size_t i = 0; i < enum_names<tool_error_kind>::spellings.size(); ++i) {
    const auto kind = static_cast<tool_error_kind>(i);
    CAPTURE(name_of(kind));
    CHECK(parse_enum<tool_error_kind>(name_of(kind)) == kind);
    CHECK(guidance_for(kind).size() > 20);
    CHECK(guidance_for(kind).back() == '.');
    sentences.insert(guidance_for(kind));
  }
  CHECK(sentences.size() == tool_error_guidance.size());
  CHECK_FALSE(parse_enum<tool_error_kind>("Budget_Exhausted"));
  CHECK(name_of(tool_error_kind::approval_required_in_program) == "approval_required_in_program");
}

TEST_CASE("built-ins: three are callable, every other one is refused with its own reason") {
  for (const char* callable : {"list_tools", "get_tool_info", "read_tool_output"}) {
    REQUIRE(builtin_named(callable));
    CHECK_FALSE(exclusion_reason(callable));
  }
  std::set<std::string_view> reasons;
  for (const char* excluded : {"ask_question", "delegate", "spawn_subagent", "check_subagent", "message_subagent",
                               "remember", "forget", "update_tasks", "load_skill", "show_component", "run_code"}) {
    CAPTURE(excluded);
    const auto reason = exclusion_reason(excluded);
    REQUIRE(reason);
    CHECK(reason->find(excluded) != std::string_view::npos);  // the sentence names what it refuses
    reasons.insert(*reason);
  }
  CHECK(reasons.size() == 11);
  // A tool that merely shares no name with a built-in is not the table's business.
  CHECK_FALSE(builtin_named("support__lookup"));
  CHECK_FALSE(exclusion_reason("list-repos"));
  // Names are exact: no case folding, no prefix matching.
  CHECK_FALSE(builtin_named("List_Tools"));
  CHECK_FALSE(builtin_named("list_tool"));
}

TEST_CASE("a tenant's budget narrows the profile's, field by field, and never widens it") {
  binding_budget profile;  // the deployment's ceilings
  binding_budget tenant{.max_calls = 50, .max_transfer_bytes = std::uint64_t{1} << 40, .max_produced_bytes = 10,
                        .max_preserved_bytes = std::uint64_t{64} << 20, .max_argument_bytes = 1024,
                        .max_result_bytes = std::uint64_t{1} << 40};
  auto terms = profile;
  narrow(terms, tenant);
  CHECK(terms.max_calls.value == 50);
  CHECK(terms.max_transfer_bytes.value == profile.max_transfer_bytes.value);  // asked wider: stays
  CHECK(terms.max_produced_bytes.value == 10);
  CHECK(terms.max_preserved_bytes.value == profile.max_preserved_bytes.value);
  CHECK(terms.max_argument_bytes.value == 1024);
  CHECK(terms.max_result_bytes.value == profile.max_result_bytes.value);
  auto again = terms;
  narrow(again, profile);  // narrowing is idempotent against a wider budget
  CHECK(again == terms);
}

TEST_CASE("each cumulative meter runs out at its ceiling, calls first") {
  const binding_budget budget{.max_calls = 3, .max_transfer_bytes = 100, .max_produced_bytes = 200,
                              .max_preserved_bytes = 50};
  CHECK_FALSE(exhausted_by(budget, {}, {.calls = 3}));
  CHECK(exhausted_by(budget, {.calls = 3}, {.calls = 1}) == meter_name::calls);
  CHECK_FALSE(exhausted_by(budget, {.transfer = 60}, {.transfer = 40}));
  CHECK(exhausted_by(budget, {.transfer = 60}, {.transfer = 41}) == meter_name::transfer);
  CHECK(exhausted_by(budget, {.produced = 200}, {.produced = 1}) == meter_name::produced);
  CHECK(exhausted_by(budget, {.preserved = 10}, {.preserved = 41}) == meter_name::preserved);
  // A call that both counts and transfers too much: the call meter is named first.
  CHECK(exhausted_by(budget, {.calls = 3, .transfer = 100}, {.calls = 1, .transfer = 1}) == meter_name::calls);
  // Nothing added spends nothing, even on an exhausted meter.
  CHECK_FALSE(exhausted_by(budget, {.calls = 9}, {}));
  // No wrap-around: a huge charge is over, not under, the ceiling.
  CHECK(exhausted_by(budget, {.transfer = 1}, {.transfer = ~std::uint64_t{0}}) == meter_name::transfer);
  CHECK(name_of(meter_name::result_bytes) == "result_bytes");
}

TEST_CASE("the Run's meters have their own ceilings, and a charge names the scope that ran out first") {
  const binding_budget budget{.max_calls = 5, .max_transfer_bytes = 100, .max_run_calls = 8, .max_run_transfer_bytes = 150};
  // This execution has room; the Run does not.
  const auto run_out = exhausted_by(budget, {.calls = 1}, {.calls = 8}, {.calls = 1});
  REQUIRE(run_out);
  CHECK(run_out->meter == meter_name::calls);
  CHECK(run_out->scope == meter_scope::run);
  // Both out: the execution is named first.
  const auto both = exhausted_by(budget, {.calls = 5}, {.calls = 8}, {.calls = 1});
  REQUIRE(both);
  CHECK(both->scope == meter_scope::execution);
  CHECK_FALSE(exhausted_by(budget, {.transfer = 50}, {.transfer = 100}, {.transfer = 50}));
  CHECK(exhausted_by(budget, {.transfer = 50}, {.transfer = 101}, {.transfer = 50})->scope == meter_scope::run);
  CHECK(ceiling_of(budget, meter_name::transfer, meter_scope::run) == 150);
  CHECK(ceiling_of(budget, meter_name::argument_bytes, meter_scope::run) == budget.max_argument_bytes.value);
  // A tenant narrows the Run's ceilings like any other.
  auto narrowed = budget;
  narrow(narrowed, binding_budget{.max_run_calls = 3});
  CHECK(narrowed.max_run_calls.value == 3);
  CHECK(narrowed.max_calls.value == 5);
}
