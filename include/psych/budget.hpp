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

/// BindingBudget: the ceilings. The defaults are deliberately modest; a deployment sets its own.
struct binding_budget {
  cap<meter_name::calls, std::uint64_t> max_calls = 200;
  cap<meter_name::transfer, std::uint64_t> max_transfer_bytes = std::uint64_t{8} << 20;
  cap<meter_name::produced, std::uint64_t> max_produced_bytes = std::uint64_t{64} << 20;
  cap<meter_name::preserved, std::uint64_t> max_preserved_bytes = std::uint64_t{64} << 20;
  cap<meter_name::argument_bytes, std::uint64_t> max_argument_bytes = std::uint64_t{256} << 10;
  cap<meter_name::result_bytes, std::uint64_t> max_result_bytes = std::uint64_t{1} << 20;
  friend constexpr bool operator==(const binding_budget&, const binding_budget&) = default;
};

}  // namespace psych

BOOST_HANA_ADAPT_STRUCT(psych::binding_budget, max_calls, max_transfer_bytes, max_produced_bytes,
                        max_preserved_bytes, max_argument_bytes, max_result_bytes);

namespace psych {

/// What has been spent of the cumulative meters (the per-call ceilings are checked per call).
struct meter_readings {
  std::uint64_t calls = 0;
  std::uint64_t transfer = 0;
  std::uint64_t produced = 0;
  std::uint64_t preserved = 0;
};

/// The meter a charge of `readings` + `more` would exhaust under `budget`, checked in the order a
/// call spends them (calls first: a call is spent when it starts); nullopt when all still fit.
constexpr std::optional<meter_name> exhausted_by(const binding_budget& budget, const meter_readings& readings,
                                                 const meter_readings& more) noexcept {
  const auto over = [](std::uint64_t spent, std::uint64_t adding, std::uint64_t ceiling) {
    return adding > 0 && (spent > ceiling || adding > ceiling - spent);
  };
  if (over(readings.calls, more.calls, budget.max_calls.value)) return meter_name::calls;
  if (over(readings.transfer, more.transfer, budget.max_transfer_bytes.value)) return meter_name::transfer;
  if (over(readings.produced, more.produced, budget.max_produced_bytes.value)) return meter_name::produced;
  if (over(readings.preserved, more.preserved, budget.max_preserved_bytes.value)) return meter_name::preserved;
  return std::nullopt;
}

}  // namespace psych
