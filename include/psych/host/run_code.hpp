#pragma once
// The run_code tool of one Run: at every turn boundary it resolves the program's bindings from the
// runtime's catalogue (the same one the model's tool list comes from), counts the Run's meters
// from the Run's log, and runs the program in the profile's sandbox. One code_run per Attempt:
// opening it is where calls an earlier Attempt left in flight become UNKNOWN.
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "psych/host/bindings.hpp"
#include "psych/host/live_output.hpp"
#include "psych/host/run_log.hpp"
#include "psych/host/sandbox.hpp"

namespace psych {

/// The bindings of one turn.
struct resolved_bindings {
  std::vector<binding> offered;          ///< what the program may call, sorted by name
  std::vector<std::string> unavailable;  ///< listed, but resolving to nothing now; never replaced
};

/// `listed` narrows the catalogue and never widens it; nullopt means every tool the agent can call
/// now. The runtime's callable built-ins are always reachable and never "unavailable".
resolved_bindings resolve_bindings(std::vector<binding> catalogue,
                                   const std::optional<std::vector<std::string>>& listed);

struct code_request {
  std::string program;
  execution_terms terms;
  std::optional<std::vector<std::string>> bindings;  ///< the Spec's; nullopt: everything, now
  std::string filename = "<program>";
  /// This call's binding budget, when the tenant's policy narrowed the Attempt's (never wider).
  std::optional<binding_budget> budget;
  output_sink* live_output = nullptr;  ///< the program's output as it runs (live_output.hpp); not owned
};

struct code_run_setup {
  sandbox* backend = nullptr;
  tool_catalogue* catalogue = nullptr;
  tool_invoker* invoker = nullptr;
  run_log* log = nullptr;  ///< the Run's journal; required, as the per-Run meters are counted from it
  binding_budget budget;   ///< the profile's BindingBudget, narrowed by the tenant's policy
  blob_store* blobs = nullptr;  ///< where outputs, artifacts and large results are preserved
  std::string tenant = "default";
};

class code_run {
 public:
  /// Opens this Attempt's view of the Run: every call the log shows started and never finished
  /// is recorded as `unknown_outcome` (it stays spent, and is never re-run).
  static result<code_run> attempt(code_run_setup setup);

  /// One program, at this turn's boundary. Failures, refusals and limit hits are in the result.
  /// Several may run at once (from several threads): they share the Run's meters live (run_meter),
  /// so together they spend no more than the Run's budget.
  sandbox_result run(const code_request& request, std::stop_token stop = {});

  /// What this Attempt found in flight from an earlier one.
  const std::vector<call_started>& unknown_calls() const noexcept { return unknown_; }
  /// The Run's meters, recounted from its log.
  result<meter_readings> run_spent() const;

 private:
  explicit code_run(code_run_setup setup) : setup_(setup) {}
  code_run_setup setup_;
  std::vector<call_started> unknown_;
  std::shared_ptr<run_meter> live_;  ///< the Run's meters, shared by the executions running at once
};

}  // namespace psych
