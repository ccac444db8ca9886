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

binding_gateway::binding_gateway(const std::vector<binding>& offered, tool_invoker* invoker)
    : offered_(invoker ? offered : std::vector<binding>{}), invoker_(invoker) {
  std::sort(offered_.begin(), offered_.end(), [](const binding& a, const binding& b) { return a.name < b.name; });
  offered_.erase(std::unique(offered_.begin(), offered_.end(),
                             [](const binding& a, const binding& b) { return a.name == b.name; }),
                 offered_.end());
}

protocol::result_frame binding_gateway::answer(const protocol::call_frame& call) const {
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
  const auto outcome = invoker_->invoke(call.tool, call.arguments.text);
  if (!outcome.ok) return refused(call, outcome.kind, outcome.message);
  // The invoker is the runtime's, not ours to trust with the frame: its value is checked first.
  auto value = protocol::decode_json<json_text>(outcome.value_json);
  if (!value)
    return refused(call, tool_error_kind::tool_failed,
                   fmt::format("the tool's result is not one JSON value: {}", value.error().message()));
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
