#pragma once
// C++ functions as tools: one object that is both the runtime's catalogue and its invoker for
// them, so a tool is named once — in its entry — and reached by the model directly and by a
// program as a binding through the same port. Shaped like mcp_binding_source (mcp.hpp); several
// sources are offered as one catalogue by binding_sources (binding_sources.hpp).
//
//   struct order_query {
//     std::string sku;
//     int quantity = 1;
//     static constexpr std::array<std::string_view, 1> required_members{"sku"};
//   };
//   BOOST_HANA_ADAPT_STRUCT(order_query, sku, quantity);
//
//   auto tools = psych::function_tools::create({
//       psych::typed_tool<order_query>("lookup_order", "An order's total, by SKU",
//           [](const order_query& q, std::stop_token) -> psych::tool_answer<order> { ... }),
//   });
//
// A typed tool's input schema is generated from its argument struct (json_schema.hpp), and its
// arguments are decoded strictly: a member the struct lacks is a malformed_call naming the
// members there are, never silently dropped. What it returns is encoded by the same codec.
// docs/runtime.md walks through a whole embedding (examples/embed/).
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/outcome/basic_result.hpp>
#include <boost/outcome/policy/terminate.hpp>
#include <fmt/format.h>

#include "psych/host/bindings.hpp"
#include "psych/json_text.hpp"
#include "psych/protocol/json.hpp"
#include "psych/protocol/json_schema.hpp"
#include "psych/result.hpp"

namespace psych {

/// Why a tool produced no value, as the program (and the model) will read it.
struct tool_error {
  tool_error_kind kind = tool_error_kind::tool_failed;
  std::string message;
};

/// What a tool function answers: a value of T, or a tool_error. Reading the value of an error is
/// a bug and traps (psych::result's policy).
template <class T>
using tool_answer = boost::outcome_v2::basic_result<T, tool_error, boost::outcome_v2::policy::terminate>;

/// A tool's own failure: `return psych::tool_failed("no order " + sku);`
inline auto tool_failed(std::string message) {
  return boost::outcome_v2::failure(tool_error{tool_error_kind::tool_failed, std::move(message)});
}

/// One tool, untyped: arguments and answer are JSON values (json_text, validated by the codec).
struct function_tool {
  std::string name;  ///< the model-facing name; not empty, no "__" (that addresses MCP servers)
  std::string description;
  std::string input_schema_json = R"({"type":"object"})";  ///< one JSON value
  /// Runs on a pool thread. `arguments` is one JSON object. Thrown exceptions become tool_failed
  /// with their what(): a throwing tool never takes the host down.
  std::function<tool_answer<json_text>(const json_text& arguments, std::stop_token stop)> call;
  /// Needs a person's approval: a program's call is refused (approval_required_in_program) before
  /// it runs, as the spec asks for destructive tools; the model can still call it directly.
  bool requires_approval = false;
};

/// A tool whose arguments are an `Args` struct (BOOST_HANA_ADAPT_STRUCT) and whose answer is any
/// type the codec knows. `fn(const Args&, std::stop_token) -> tool_answer<R>`.
template <class Args, class Function>
function_tool typed_tool(std::string name, std::string description, Function fn) {
  using answer = std::invoke_result_t<Function&, const Args&, std::stop_token>;
  using value_type = typename answer::value_type;
  function_tool tool{std::move(name), std::move(description), protocol::json_schema<Args>(), {}, false};
  tool.call = [fn = std::move(fn)](const json_text& arguments, std::stop_token stop) mutable -> tool_answer<json_text> {
    auto decoded = protocol::decode_json_strict<Args>(arguments.text);
    if (!decoded)
      return boost::outcome_v2::failure(tool_error{tool_error_kind::malformed_call,
                                                   fmt::format("the arguments do not fit: {}", decoded.error().message())});
    answer produced = fn(decoded.value(), std::move(stop));
    if (!produced) return boost::outcome_v2::failure(produced.error());
    if constexpr (std::is_same_v<value_type, json_text>) return std::move(produced).value();
    else return json_text{protocol::encode_json(produced.value())};
  };
  return tool;
}

/// Several function tools as one catalogue and invoker. Calls run on a pool of its own threads
/// (blocking_invoker), so a slow tool never stops the host reading frames or holding the wall
/// clock; the pool is joined before the tools are destroyed.
///
/// Outcomes: the tool's value (checked to be one JSON value), its tool_error, malformed_call
/// (arguments that are not one JSON object, or that do not fit a typed tool), unknown_tool (a name
/// this source does not have), tool_failed for a thrown exception or an answer that is not JSON.
class function_tools final : public tool_catalogue, public tool_invoker {
 public:
  /// invalid_argument for a name that is empty, contains "__" or is used twice, or a schema that
  /// is not one JSON value.
  static result<std::unique_ptr<function_tools>> create(std::vector<function_tool> tools, std::size_t threads = 4);
  ~function_tools() override;
  function_tools(const function_tools&) = delete;
  function_tools& operator=(const function_tools&) = delete;

  std::vector<binding> offered_now() override;
  call_permission permit(const tool_call& call) override;
  void invoke(const tool_call& call, std::stop_token stop, std::function<void(tool_outcome)> done) override;

  /// Runs one tool on the calling thread: what a runtime's own direct-call path (the model calling
  /// the tool itself) uses, with the same decoding and the same outcomes.
  tool_outcome call_now(std::string_view tool, std::string_view arguments_json, std::stop_token stop = {}) const;

 private:
  struct impl;
  explicit function_tools(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

}  // namespace psych
