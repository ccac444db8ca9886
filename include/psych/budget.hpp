#pragma once
// Binding budgets: how much of the host's work one execution, and one Run, may spend through a
// program's tool calls. The deployment owns the numbers (the profile's BindingBudget); a tenant's
// CodeExecutionPolicy may only narrow them; a spec can neither raise nor carry them. Narrowing is
// the same generic field walk as the limits (limits.hpp), over caps keyed by meter.
#include <cstdint>
#include <optional>
#include <string>

#include <boost/hana/adapt_struct.hpp>

#include "psych/limits.hpp"
#include "psych/names.hpp"

namespace psych {

/// The meters, each kept per execution and per Run (the per-Run half is counted from the run log).
enum class meter_name {
  calls,           ///< binding calls started (a call is spent when it starts, whatever follows)
  transfer,        ///< bytes that crossed into the sandbox
  produced,        ///< bytes the host's tools made, whether or not the program received them
  preserved,       ///< bytes kept in the run log or the BlobStore
  argument_bytes,  ///< per call: the largest arguments one call may send
  result_bytes,    ///< per call: the largest result one call may hand over whole
};
PSYCH_ENUM_NAMES(meter_name, "calls", "transfer", "produced", "preserved", "argument_bytes", "result_bytes");

/// The scope a cumulative meter is kept in: one execution, or the whole Run (every execution and
/// every Attempt of it, counted from the run log).
enum class meter_scope { execution, run };
PSYCH_ENUM_NAMES(meter_scope, "execution", "run");

/// BindingBudget: the ceilings. The defaults are deliberately modest; a deployment sets its own.
/// The per-Run ceilings are what stops a model buying a fresh allowance with a second program.
struct binding_budget {
  cap<meter_name::calls, std::uint64_t> max_calls = 200;
  cap<meter_name::transfer, std::uint64_t> max_transfer_bytes = std::uint64_t{8} << 20;
  cap<meter_name::produced, std::uint64_t> max_produced_bytes = std::uint64_t{64} << 20;
  cap<meter_name::preserved, std::uint64_t> max_preserved_bytes = std::uint64_t{64} << 20;
  cap<meter_name::argument_bytes, std::uint64_t> max_argument_bytes = std::uint64_t{256} << 10;
  cap<meter_name::result_bytes, std::uint64_t> max_result_bytes = std::uint64_t{1} << 20;
  cap<meter_name::calls, std::uint64_t> max_run_calls = 1000;
  cap<meter_name::transfer, std::uint64_t> max_run_transfer_bytes = std::uint64_t{32} << 20;
  cap<meter_name::produced, std::uint64_t> max_run_produced_bytes = std::uint64_t{256} << 20;
  cap<meter_name::preserved, std::uint64_t> max_run_preserved_bytes = std::uint64_t{256} << 20;
  friend constexpr bool operator==(const binding_budget&, const binding_budget&) = default;
};

}  // namespace psych

BOOST_HANA_ADAPT_STRUCT(psych::binding_budget, max_calls, max_transfer_bytes, max_produced_bytes,
                        max_preserved_bytes, max_argument_bytes, max_result_bytes, max_run_calls,
                        max_run_transfer_bytes, max_run_produced_bytes, max_run_preserved_bytes);

namespace psych {

/// What has been spent of the cumulative meters (the per-call ceilings are checked per call).
struct meter_readings {
  std::uint64_t calls = 0;
  std::uint64_t transfer = 0;
  std::uint64_t produced = 0;
  std::uint64_t preserved = 0;
  constexpr meter_readings& operator+=(const meter_readings& more) noexcept {
    calls += more.calls, transfer += more.transfer, produced += more.produced, preserved += more.preserved;
    return *this;
  }
  friend constexpr bool operator==(const meter_readings&, const meter_readings&) = default;
};

/// The ceiling of one cumulative meter in one scope.
constexpr std::uint64_t ceiling_of(const binding_budget& budget, meter_name meter, meter_scope scope) noexcept {
  const bool run = scope == meter_scope::run;
  switch (meter) {
    case meter_name::calls: return (run ? budget.max_run_calls : budget.max_calls).value;
    case meter_name::transfer: return (run ? budget.max_run_transfer_bytes : budget.max_transfer_bytes).value;
    case meter_name::produced: return (run ? budget.max_run_produced_bytes : budget.max_produced_bytes).value;
    case meter_name::preserved: return (run ? budget.max_run_preserved_bytes : budget.max_preserved_bytes).value;
    case meter_name::argument_bytes: return budget.max_argument_bytes.value;
    case meter_name::result_bytes: return budget.max_result_bytes.value;
  }
  return 0;
}

constexpr std::uint64_t reading_of(const meter_readings& readings, meter_name meter) noexcept {
  switch (meter) {
    case meter_name::calls: return readings.calls;
    case meter_name::transfer: return readings.transfer;
    case meter_name::produced: return readings.produced;
    case meter_name::preserved: return readings.preserved;
    default: return 0;
  }
}

/// The meter a charge of `readings` + `more` would exhaust under `budget` in `scope`, checked in
/// the order a call spends them (calls first: a call is spent when it starts); nullopt when all
/// still fit.
constexpr std::optional<meter_name> exhausted_by(const binding_budget& budget, const meter_readings& readings,
                                                 const meter_readings& more,
                                                 meter_scope scope = meter_scope::execution) noexcept {
  for (const auto meter : {meter_name::calls, meter_name::transfer, meter_name::produced, meter_name::preserved}) {
    const std::uint64_t spent = reading_of(readings, meter), adding = reading_of(more, meter);
    const std::uint64_t ceiling = ceiling_of(budget, meter, scope);
    if (adding > 0 && (spent > ceiling || adding > ceiling - spent)) return meter;
  }
  return std::nullopt;
}

/// Where a charge runs out first: the execution's meters, then the Run's.
struct exhaustion {
  meter_name meter;
  meter_scope scope;
};
constexpr std::optional<exhaustion> exhausted_by(const binding_budget& budget, const meter_readings& execution,
                                                 const meter_readings& run, const meter_readings& more) noexcept {
  if (const auto meter = exhausted_by(budget, execution, more, meter_scope::execution))
    return exhaustion{*meter, meter_scope::execution};
  if (const auto meter = exhausted_by(budget, run, more, meter_scope::run)) return exhaustion{*meter, meter_scope::run};
  return std::nullopt;
}

/// The words of a refusal, one wording for calls and preserved outputs alike:
/// "preserved: 70 of 70 spent in this execution".
inline std::string exhaustion_message(const exhaustion& out, const binding_budget& budget,
                                      const meter_readings& execution, const meter_readings& run) {
  const auto& readings = out.scope == meter_scope::run ? run : execution;
  return std::string(name_of(out.meter)) + ": " + std::to_string(reading_of(readings, out.meter)) + " of " +
         std::to_string(ceiling_of(budget, out.meter, out.scope)) + " spent in this " +
         (out.scope == meter_scope::run ? "Run" : "execution");
}

}  // namespace psych
