#pragma once
// How every backend ends a result, once it knows how the execution ended (its failure decided, its
// streams and artifacts in the result): what the calls spent and what went wrong with them, the
// backend's own later problems, each stream's preview, and every item as an attachment
// (attachments.hpp). A local or container execution ends here through its session, a remote one
// through the remote client.
#include <string>
#include <string_view>
#include <vector>

#include "psych/budget.hpp"
#include "psych/host/blob_store.hpp"
#include "psych/output.hpp"
#include "psych/sandbox_result.hpp"
#include "bindings/binding_gateway.hpp"
#include "execution/attachments.hpp"

namespace psych::host {

/// What the execution leaves for the tail of its result, in the order its problems are told.
struct result_tail {
  meter_readings calls_spent;              ///< what the program's calls spent (the gateway's reading)
  std::vector<std::string> call_problems;  ///< what went wrong with them
  std::vector<std::string> problems;       ///< the backend's own, told after the calls'
};

/// The tail of an execution whose calls went through `gateway`.
result_tail tail_of_calls(const binding_gateway& gateway);

/// Where a result's items go, and who pays for preserving them.
struct result_destination {
  output_policy output;
  blob_store* blobs = nullptr;  ///< none: previews only
  std::string_view tenant;
  preservation_account account;
};

/// Sets the calls' spending, appends the calls' problems and then the tail's own, cuts each
/// stream's preview once (`stdout_preview` is the stdout attachment's preview, and so for stderr),
/// and attaches every item: under REQUIRED an item that could not be preserved is the result's
/// failure unless it already has one.
void finish_result(sandbox_result& result, result_tail tail, const result_destination& where);

}  // namespace psych::host
