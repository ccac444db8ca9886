// C++ functions as one catalogue and invoker (include/psych/host/function_tools.hpp).
#include "psych/host/function_tools.hpp"

#include <algorithm>
#include <set>

#include "psych/host/blocking_invoker.hpp"

namespace psych {
namespace {

bool is_json_value(std::string_view text) { return protocol::decode_json<json_text>(text).has_value(); }

/// One JSON value whose first byte is `{`: validated without copying the object's members out.
bool is_json_object(std::string_view text) {
  const auto start = text.find_first_not_of(" \t\r\n");
  return start != std::string_view::npos && text[start] == '{' && is_json_value(text);
}

}  // namespace

struct function_tools::impl {
  std::vector<function_tool> tools;  ///< sorted by name; never changed after create()
  std::unique_ptr<blocking_invoker> invoker;  ///< reset first: its pool calls the tools

  [[nodiscard]] const function_tool* find(std::string_view name) const {
    const auto found = std::ranges::lower_bound(tools, name, {}, &function_tool::name);
    return found != tools.end() && found->name == name ? &*found : nullptr;
  }

  tool_outcome call(std::string_view name, std::string_view arguments_json, std::stop_token stop) const {
    const function_tool* tool = find(name);
    if (tool == nullptr)
      return tool_outcome::error(tool_error_kind::unknown_tool, fmt::format("no function tool is named {:?}", name));
    if (!is_json_object(arguments_json))
      return tool_outcome::error(tool_error_kind::malformed_call,
                                 fmt::format("{}: the arguments must be one JSON object", name));
    try {
      auto answer = tool->call(json_text{std::string(arguments_json)}, std::move(stop));
      if (!answer) return tool_outcome::error(answer.error().kind, std::move(answer.error().message));
      // A json_text a tool built by hand is checked here, where the mistake can still be named.
      if (!is_json_value(answer.value().text))
        return tool_outcome::error(tool_error_kind::tool_failed,
                                   fmt::format("{} answered something that is not one JSON value", name));
      return tool_outcome::value(std::move(answer).value().text);
    } catch (const std::exception& thrown) {
      return tool_outcome::error(tool_error_kind::tool_failed, thrown.what());
    } catch (...) {
      return tool_outcome::error(tool_error_kind::tool_failed, fmt::format("{} threw something that is not a std::exception", name));
    }
  }
};

result<std::unique_ptr<function_tools>> function_tools::create(std::vector<function_tool> tools, std::size_t threads) {
  std::set<std::string_view> names;
  for (const auto& tool : tools) {
    if (tool.name.empty() || tool.name.find("__") != std::string::npos)
      return fail_with(error_kind::invalid_argument,
                     fmt::format("function tool name {:?} is empty or holds \"__\" (which addresses MCP servers)", tool.name));
    if (!names.insert(tool.name).second)
      return fail_with(error_kind::invalid_argument, fmt::format("function tool {:?} is given twice", tool.name));
    if (!tool.call) return fail_with(error_kind::invalid_argument, fmt::format("function tool {:?} has no function", tool.name));
    if (auto schema = protocol::decode_json<json_text>(tool.input_schema_json); !schema)
      return fail_with(error_kind::invalid_argument,
                     fmt::format("function tool {:?}: its input schema is not JSON: {}", tool.name, schema.error().message()));
  }
  auto state = std::make_unique<impl>();
  state->tools = std::move(tools);
  std::ranges::sort(state->tools, {}, &function_tool::name);
  const impl* calls = state.get();
  state->invoker = std::make_unique<blocking_invoker>(
      [calls](const tool_call& call) {
        const function_tool* tool = calls->find(call.tool);
        if (tool != nullptr && tool->requires_approval)
          return call_permission::approval(fmt::format("{} needs a person's approval: call it directly, not from a program", call.tool));
        return call_permission::allow();
      },
      [calls](const owned_tool_call& call, std::stop_token stop) {
        return calls->call(call.tool, call.arguments_json, std::move(stop));
      },
      threads);
  return std::unique_ptr<function_tools>(new function_tools(std::move(state)));
}

function_tools::function_tools(std::unique_ptr<impl> i) : impl_(std::move(i)) {}

function_tools::~function_tools() { impl_->invoker.reset(); }

std::vector<binding> function_tools::offered_now() {
  std::vector<binding> offered;
  offered.reserve(impl_->tools.size());
  for (const auto& tool : impl_->tools)
    offered.push_back({.name = tool.name, .description = tool.description, .input_schema_json = tool.input_schema_json});
  return offered;
}

call_permission function_tools::permit(const tool_call& call) { return impl_->invoker->permit(call); }

void function_tools::invoke(const tool_call& call, std::stop_token stop, std::function<void(tool_outcome)> done) {
  impl_->invoker->invoke(call, std::move(stop), std::move(done));
}

tool_outcome function_tools::call_now(std::string_view tool, std::string_view arguments_json, std::stop_token stop) const {
  return impl_->call(tool, arguments_json, std::move(stop));
}

}  // namespace psych
