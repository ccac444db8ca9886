#pragma once
// After an execution: each item of the result (stdout, stderr, the value, each collected artifact)
// becomes a ResultAttachment, preserved in the BlobStore where the OutputPolicy and the store say.
#include <string_view>

#include "psych/host/blob_store.hpp"
#include "psych/output.hpp"
#include "psych/sandbox_result.hpp"

namespace psych::host {

/// Fills `result.attachments`, and counts what was preserved on `result.bindings_spent.preserved`.
/// A store that fails under REQUIRED is the result's failure (`preservation_unavailable`), unless
/// the execution already failed, in which case it is one of its problems.
void attach_items(sandbox_result& result, const output_policy& policy, blob_store* store, std::string_view tenant);

}  // namespace psych::host
