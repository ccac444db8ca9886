#include "binding_gateway.hpp"

#include <algorithm>
#include <functional>
#include <ranges>

#include <fmt/format.h>

#include "psych/builtins.hpp"
#include "psych/protocol/json.hpp"

namespace psych::host {

namespace {

protocol::result_frame refused(const protocol::call_frame& call, tool_error_kind kind, std::string message) {
  return {.id = call.id, .ok = false, .value = std::nullopt,
          .error = protocol::call_error{.kind = kind, .tool = call.tool, .message = std::move(message)}};
}

}  // namespace

binding_gateway::binding_gateway(const std::vector<binding>& offered, tool_invoker* invoker,
                                 const binding_budget& budget)
    : offered_(invoker ? offered : std::vector<binding>{}), invoker_(invoker), budget_(budget) {
  std::sort(offered_.begin(), offered_.end(), [](const binding& a, const binding& b) { return a.name < b.name; });
  offered_.erase(std::unique(offered_.begin(), offered_.end(),
                             [](const binding& a, const binding& b) { return a.name == b.name; }),
                 offered_.end());
}

protocol::result_frame binding_gateway::answer(const protocol::call_frame& call) {
  if (const auto reason = exclusion_reason(call.tool))
    return refused(call, tool_error_kind::excluded_builtin, std::string(*reason));
  const bool offered = std::ranges::binary_search(offered_, std::string_view(call.tool), std::less<>{},
                                                  [](const binding& b) { return std::string_view(b.name); });
  if (!offered)
    return refused(call, tool_error_kind::unknown_tool,
                   fmt::format("no tool named {:?} is offered to this program; TOOLS lists those that are", call.tool));
  // The codec already proved `arguments` is one JSON value; a program may still send a non-object.
  if (call.arguments.text.empty() || call.arguments.text.front() != '{')
    return refused(call, tool_error_kind::malformed_call, "arguments must be a JSON object");
  if (call.arguments.text.size() > budget_.max_argument_bytes.value)
    return refused(call, tool_error_kind::argument_too_large,
                   fmt::format("argument_bytes: {} bytes of arguments, the ceiling per call is {}",
                               call.arguments.text.size(), budget_.max_argument_bytes.value));
  // A call is spent when it starts, whatever happens after.
  if (const auto meter = exhausted_by(budget_, spent_, {.calls = 1}))
    return refused(call, tool_error_kind::budget_exhausted,
                   fmt::format("{}: {} of {} spent", name_of(*meter), spent_.calls, budget_.max_calls.value));
  ++spent_.calls;
  const auto outcome = invoker_->invoke(call.tool, call.arguments.text);
  if (!outcome.ok) return refused(call, outcome.kind, outcome.message);
  const std::uint64_t size = outcome.value_json.size();
  const bool produced_exhausted = exhausted_by(budget_, spent_, {.produced = size}).has_value();
  spent_.produced += size;  // made by the host's tool, whether or not the program receives it
  if (produced_exhausted)
    return refused(call, tool_error_kind::budget_exhausted,
                   fmt::format("produced: {} bytes, the ceiling is {}", spent_.produced, budget_.max_produced_bytes.value));
  // No BlobStore yet: a result over the per-call ceiling cannot be paged, so it is refused whole.
  if (size > budget_.max_result_bytes.value)
    return refused(call, tool_error_kind::binding_result_not_paged,
                   fmt::format("result_bytes: the result is {} bytes, the ceiling per call is {}, and it was not "
                               "preserved for paging",
                               size, budget_.max_result_bytes.value));
  if (exhausted_by(budget_, spent_, {.transfer = size}))
    return refused(call, tool_error_kind::budget_exhausted,
                   fmt::format("transfer: {} more bytes would pass {} of {}", size, spent_.transfer,
                               budget_.max_transfer_bytes.value));
  // The invoker is the runtime's, not ours to trust with the frame: its value is checked first.
  auto value = protocol::decode_json<json_text>(outcome.value_json);
  if (!value)
    return refused(call, tool_error_kind::tool_failed,
                   fmt::format("the tool's result is not one JSON value: {}", value.error().message()));
  spent_.transfer += size;
  return {.id = call.id, .ok = true, .value = std::move(value).value(), .error = std::nullopt};
}

std::vector<protocol::binding_info> binding_gateway::bindings_for_run() const {
  std::vector<protocol::binding_info> out;
  for (const auto& offered : offered_) out.push_back({offered.name, offered.description});
  return out;
}

std::vector<protocol::excluded_builtin> binding_gateway::excluded_for_run() {
  std::vector<protocol::excluded_builtin> out;
  for (const auto& rule : builtin_rules)
    if (!rule.reason.empty()) out.push_back({std::string(rule.name), std::string(rule.reason)});
  return out;
}

}  // namespace psych::host
