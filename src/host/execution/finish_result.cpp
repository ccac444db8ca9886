#include "execution/finish_result.hpp"

#include <utility>

#include "psych/preview.hpp"

namespace psych::host {

result_tail tail_of_calls(const binding_gateway& gateway) {
  return {.calls_spent = gateway.spent(), .call_problems = gateway.problems(), .problems = {}};
}

void finish_result(sandbox_result& result, result_tail tail, const result_destination& where) {
  result.bindings_spent = tail.calls_spent;
  auto& problems = result.problems;
  problems.insert(problems.end(), tail.call_problems.begin(), tail.call_problems.end());
  problems.insert(problems.end(), std::make_move_iterator(tail.problems.begin()),
                  std::make_move_iterator(tail.problems.end()));
  const auto preview_bytes = where.output.preview_bytes;
  auto out = cut_preview(result.stdout_data, result.stdout_size, preview_bytes);
  auto err = cut_preview(result.stderr_data, result.stderr_size, preview_bytes);
  result.stdout_preview = out.text;
  result.stderr_preview = err.text;
  attach_items(result, where.output, where.blobs, where.tenant, where.account, {std::move(out), std::move(err)});
}

}  // namespace psych::host
