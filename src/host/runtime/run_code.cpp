#include "psych/host/run_code.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "psych/builtins.hpp"
#include "os/random_hex.hpp"

namespace psych {

namespace {

std::string new_execution_id() { return "x" + host::random_hex(8); }

}  // namespace

resolved_bindings resolve_bindings(std::vector<binding> catalogue,
                                   const std::optional<std::vector<std::string>>& listed) {
  std::sort(catalogue.begin(), catalogue.end(), [](const binding& a, const binding& b) { return a.name < b.name; });
  catalogue.erase(std::unique(catalogue.begin(), catalogue.end(),
                              [](const binding& a, const binding& b) { return a.name == b.name; }),
                  catalogue.end());
  if (!listed) return {std::move(catalogue), {}};
  resolved_bindings out;
  for (const auto& name : *listed) {
    const auto found = std::ranges::find(catalogue, name, &binding::name);
    if (found != catalogue.end()) {
      if (std::ranges::find(out.offered, name, &binding::name) == out.offered.end()) out.offered.push_back(*found);
    } else if (!builtin_named(name) &&
               std::ranges::find(out.unavailable, name) == out.unavailable.end()) {
      out.unavailable.push_back(name);
    }
  }
  std::sort(out.offered.begin(), out.offered.end(), [](const binding& a, const binding& b) { return a.name < b.name; });
  std::sort(out.unavailable.begin(), out.unavailable.end());
  return out;
}

result<code_run> code_run::attempt(code_run_setup setup) {
  if (!setup.backend || !setup.catalogue || !setup.invoker || !setup.log)
    return fail_with(error_kind::invalid_argument, "code_run needs a sandbox, a catalogue, an invoker and a run log");
  code_run opened(setup);
  PSYCH_TRY(auto records, setup.log->records());
  opened.unknown_ = tally(records).unknown;
  for (const auto& lost : opened.unknown_) {
    const call_finished unknown{.call_id = lost.call_id, .outcome = tool_error_kind::unknown_outcome};
    PSYCH_TRY(setup.log->append(unknown));
    records.emplace_back(unknown);
  }
  opened.live_ = std::make_shared<run_meter>(tally(records).spent);
  return opened;
}

result<meter_readings> code_run::run_spent() const {
  PSYCH_TRY(auto records, setup_.log->records());
  return tally(records).spent;
}

sandbox_result code_run::run(const code_request& request, std::stop_token stop) {
  auto turn = resolve_bindings(setup_.catalogue->offered_now(), request.bindings);
  auto spent = run_spent();
  if (!spent) {
    // Without the Run's count nothing may be spent: the program runs with no bindings at all.
    sandbox_result refused;
    refused.failure = sandbox_failure{failure_kind::launch_failed, "run log: " + spent.error().message()};
    return refused;
  }
  run_request run{.program = request.program,
                  .terms = request.terms,
                  .filename = request.filename,
                  .bindings = std::move(turn.offered),
                  .invoker = setup_.invoker,
                  .unavailable_bindings = std::move(turn.unavailable),
                  .budget = request.budget.value_or(setup_.budget),
                  .run = {.log = setup_.log,
                          .spent_before = spent.value(),
                          .execution_id = new_execution_id(),
                          .live = live_.get()},
                  .blobs = setup_.blobs,
                  .tenant = setup_.tenant,
                  .live_output = request.live_output};
  return setup_.backend->run(run, std::move(stop));
}

}  // namespace psych
