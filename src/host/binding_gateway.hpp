#pragma once
// The host's side of a program's calls: one `call` frame in, one `result` frame out. It resolves
// the name against what the program was offered, refuses excluded built-ins with their own
// reason, meters it against the execution's binding budget, and otherwise hands it to the runtime's
// invoker. Approvals, the per-Run half of the meters and the run log come next
// (docs/bindings-plan.md); a refusal here never reaches the invoker.
#include <string>
#include <vector>

#include "psych/budget.hpp"
#include "psych/host/bindings.hpp"
#include "psych/protocol/frames.hpp"

namespace psych::host {

class binding_gateway {
 public:
  binding_gateway(const std::vector<binding>& offered, tool_invoker* invoker, const binding_budget& budget);

  /// The answer to one call, metered. Never throws.
  protocol::result_frame answer(const protocol::call_frame& call);

  /// What this execution has spent so far.
  const meter_readings& spent() const noexcept { return spent_; }

  /// What `run` tells the program: its bindings (sorted by name) and the built-ins it may not call.
  std::vector<protocol::binding_info> bindings_for_run() const;
  static std::vector<protocol::excluded_builtin> excluded_for_run();

 private:
  std::vector<binding> offered_;  ///< sorted by name, no duplicates
  tool_invoker* invoker_;
  binding_budget budget_;
  meter_readings spent_;
};

}  // namespace psych::host
