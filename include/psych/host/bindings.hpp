#pragma once
// What a program may call, and the one way its calls reach the agent's tools. The runtime hands
// the host an invoker (its own direct tool path: scope, policy, approvals, recording); the host
// never sees a registry. docs/bindings-plan.md has the whole design; this is its first slice.
#include <string>
#include <string_view>

#include "psych/tool_errors.hpp"

namespace psych {

/// One tool a program may call, by its model-facing name, whatever characters that has.
struct binding {
  std::string name;
  std::string description;
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

/// The runtime's side. Called on the host, once per call that passed the host's own checks.
class tool_invoker {
 public:
  virtual ~tool_invoker() = default;
  /// `arguments_json` is one JSON object. Must not throw; a tool's failure is `tool_failed`.
  virtual tool_outcome invoke(std::string_view tool, std::string_view arguments_json) = 0;
};

}  // namespace psych
