#pragma once
// The host's side of a program's calls: one `call` frame in, one `result` frame out, in steps
// so that a tool may take its time while the host keeps reading. `admit` resolves the name
// against what the program was offered, refuses excluded built-ins with their own reason, meters
// the call against the execution's and the Run's budget and logs it as started, without waiting
// for the record to be durable. `proceed` makes every started record logged so far durable with
// one sync (from then on those calls are spent), asks the policy, and answers the callable
// built-ins itself; what is left is the invoker's. Calls admitted together therefore share one
// sync. `complete` meters and logs what the tool produced (not waiting: a crash before a later
// sync leaves the call UNKNOWN, the safe reading) and builds the answer.
#include <cstdint>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "psych/budget.hpp"
#include "psych/host/bindings.hpp"
#include "psych/host/blob_store.hpp"
#include "psych/host/run_log.hpp"
#include "psych/protocol/frames.hpp"

namespace psych::host {

struct gateway_setup {
  std::vector<binding> offered;
  std::vector<std::string> unavailable;  ///< listed by the spec, resolving to nothing this turn
  tool_invoker* invoker = nullptr;       ///< none: nothing is offered (unless relayed)
  /// The calls are relayed to a client that answers them (call_relay.hpp): `offered` is what `run`
  /// lists, and nothing here admits or runs a call.
  bool relayed = false;
  binding_budget budget;
  run_account run;
  blob_store* blobs = nullptr;  ///< where results over the transfer ceiling are preserved for paging
  std::string tenant = "default";
};

/// A call that passed every check and is logged as started: the invoker's once `proceed` let it.
struct admitted_call {
  std::int64_t id = 0;  ///< the program's
  std::string call_id;  ///< the Run's, the run log's key
  std::string tool;
  std::string arguments_json;
};

class binding_gateway {
 public:
  explicit binding_gateway(gateway_setup setup);

  using admission = std::variant<protocol::result_frame, admitted_call>;
  /// A refusal now, or the call logged as started, not yet durably: hand it to `proceed` before
  /// anything else happens to it. Never throws.
  admission admit(const protocol::call_frame& call);
  /// For an admitted call: its started record made durable (one sync covers every call admitted
  /// before it), then an answer now (a refusal, or a built-in's value) or the call for the invoker.
  admission proceed(const admitted_call& call);
  /// Makes everything logged so far durable; false (and a problem) when the log failed.
  bool sync_journal();
  /// The answer to an admitted call, metered and logged.
  protocol::result_frame complete(const admitted_call& call, const tool_outcome& outcome);
  /// An admitted call that ended after the program stopped waiting for it (it gave up on it, or
  /// the execution ended): what the tool made is metered and logged, nothing is handed over.
  void abandon(const admitted_call& call, const tool_outcome& outcome);

  /// What this execution has spent, and the Run with it.
  const meter_readings& spent() const noexcept { return spent_; }
  meter_readings run_spent() const noexcept;
  /// Failures of the run log (each refused the call it concerned), for the result's problems.
  const std::vector<std::string>& problems() const noexcept { return problems_; }
  tool_invoker* invoker() const noexcept { return setup_.invoker; }

  /// What `run` tells the program: its bindings (sorted by name) and the built-ins it may not call.
  std::vector<protocol::binding_info> bindings_for_run() const;
  static std::vector<protocol::excluded_builtin> excluded_for_run();

 private:
  protocol::result_frame builtin_answer(const admitted_call& admitted);
  protocol::result_frame hand_over_handle(const admitted_call& call, const std::string& value_json);
  protocol::result_frame read_window(const admitted_call& admitted);
  protocol::result_frame refuse_admitted(const admitted_call& call, tool_error_kind kind, std::string message);
  bool journal(const run_log_record& record);
  /// Adds to this execution's meters and to the Run's live ones, where executions share them.
  void spend(const meter_readings& more);
  bool callable_builtin(std::string_view tool) const;
  const binding* find(std::string_view name) const;

  gateway_setup setup_;  ///< offered sorted by name, no duplicates
  meter_readings spent_;
  std::vector<std::string> problems_;
  std::set<std::string> own_handles_;  ///< handles this program's own calls produced
  bool started_not_durable_ = false;   ///< a call was admitted since the last sync
};

}  // namespace psych::host
