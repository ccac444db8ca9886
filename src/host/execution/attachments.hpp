#pragma once
// After an execution: each item of the result (stdout, stderr, the value, each collected artifact)
// becomes a ResultAttachment, preserved in the BlobStore where the OutputPolicy and the store say,
// and where the `preserved` meter still has room: what an execution leaves in the store is the
// Run's spending as much as a call's recorded result is.
#include <string_view>

#include "psych/budget.hpp"
#include "psych/host/blob_store.hpp"
#include "psych/host/run_log.hpp"
#include "psych/output.hpp"
#include "psych/preview.hpp"
#include "psych/sandbox_result.hpp"

namespace psych::host {

/// Where preserving is charged: the budget's `preserved` ceilings, and the Run's account, whose log
/// records each preservation (`output_preserved`) before the bytes are put. `result.bindings_spent`
/// holds what the execution's calls already spent.
struct preservation_account {
  binding_budget budget;
  run_account run;
};

/// The streams' previews, cut once (finish_result.hpp): the result's and its attachments' are the same text.
struct stream_previews {
  preview_cut out, err;
};

/// Fills `result.attachments`, and counts what was preserved on `result.bindings_spent.preserved`.
/// An item the store fails, the meter has no room for or the log cannot record is not preserved;
/// under REQUIRED that is the result's failure (`preservation_unavailable`), unless the execution
/// already failed, in which case it is one of its problems.
void attach_items(sandbox_result& result, const output_policy& policy, blob_store* store, std::string_view tenant,
                  const preservation_account& account, stream_previews streams);

}  // namespace psych::host
