#pragma once
// What a program may call, and the one way its calls reach the agent's tools. The runtime hands
// the host two ports: its catalogue (the same one the model's tool list comes from, read at every
// turn boundary) and its invoker (its own direct tool path: scope, policy, approvals, egress,
// recording). The host never sees a registry. docs/bindings.md has the whole design.
#include <functional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "psych/tool_errors.hpp"

namespace psych {

/// Where a tool comes from, as the catalogue knows it: every kind is reached through the same port.
enum class binding_origin {
  tool,  ///< a tool registered with the runtime (a CodeTool, an HttpTool)
  mcp,   ///< a tool of a connected MCP server, named `server__tool`
  a2a,   ///< a skill of a connected A2A peer, named `peer__skill`
};

/// One tool a program may call, by its model-facing name, whatever characters that has.
struct binding {
  std::string name;
  std::string description;
  /// The argument schema, one JSON value ("{}" when the tool publishes none). Programs learn it
  /// only through get_tool_info, so a deferred catalogue costs nothing until it is read.
  std::string input_schema_json = "{}";
  /// Left out of the model's prompt (a deferred MCP catalogue); still bindable.
  bool deferred = false;
  binding_origin origin = binding_origin::tool;
};

/// The runtime's catalogue: every tool this agent can call right now, after every narrowing
/// plane (registered tools, granted MCP servers and A2A peers, the tenant's policy).
class tool_catalogue {
 public:
  virtual ~tool_catalogue() = default;
  /// Read at each turn boundary; a tool withdrawn since the last read is simply absent.
  virtual std::vector<binding> offered_now() = 0;
};

/// One call on its way to a tool.
struct tool_call {
  std::string_view call_id;       ///< unique within the Run (the run log's key)
  std::string_view execution_id;  ///< the program's execution
  std::string_view tool;
  std::string_view arguments_json;  ///< one JSON object
};

/// What one call produced: a JSON value, or why there is none.
struct tool_outcome {
  bool ok = false;
  std::string value_json;  ///< one JSON value when ok
  tool_error_kind kind = tool_error_kind::tool_failed;
  std::string message;

  static tool_outcome value(std::string json) { return {true, std::move(json), tool_error_kind::tool_failed, {}}; }
  static tool_outcome error(tool_error_kind kind, std::string message) { return {false, {}, kind, std::move(message)}; }
};

/// The policy's answer for one call, asked before anything is spent or run.
struct call_permission {
  enum class verdict { allowed, denied, needs_approval };
  verdict decision = verdict::allowed;
  std::string reason;  ///< for the program, when not allowed

  static call_permission allow() { return {}; }
  static call_permission deny(std::string why) { return {verdict::denied, std::move(why)}; }
  static call_permission approval(std::string why) { return {verdict::needs_approval, std::move(why)}; }
};

/// The runtime's direct tool path.
class tool_invoker {
 public:
  virtual ~tool_invoker() = default;
  /// The same Policy check (and approval rule) a direct call by the model gets. A tool that needs
  /// a person's approval is refused in a program before it runs: nobody can approve while a
  /// subprocess waits.
  virtual call_permission permit(const tool_call& call) = 0;
  /// Runs the tool and calls `done` exactly once, from any thread, now or later. When `stop` is
  /// requested (the execution ended, or the program gave up on the call) the tool should end as
  /// soon as it can; its outcome is then recorded, not delivered. The strings of `call` live
  /// only until invoke returns. Must not throw.
  virtual void invoke(const tool_call& call, std::stop_token stop, std::function<void(tool_outcome)> done) = 0;
};

}  // namespace psych
