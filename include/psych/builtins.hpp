#pragma once
// The runtime's own built-in tools, as programs see them: three are callable, the rest are refused,
// each for its own reason. One table, here: the bootstrap's refusals, the host's and the docs all
// read it (the spec's EXCLUDED_BUILTINS).
#include <algorithm>
#include <array>
#include <optional>
#include <string_view>

namespace psych {

struct builtin_rule {
  std::string_view name;
  std::string_view reason;  ///< empty: callable from a program
};

inline constexpr std::array<builtin_rule, 14> builtin_rules{{
    // Callable: bounded, read-only, and the only way to learn a deferred tool's argument schema.
    {"list_tools", ""},
    {"get_tool_info", ""},
    // Callable, for handles this program's own calls produced (never another's bytes).
    {"read_tool_output", ""},
    {"ask_question", "ask_question suspends the Run, and nothing can resume into a subprocess."},
    {"delegate", "delegate starts a child Run that would outlive the execution."},
    {"spawn_subagent", "spawn_subagent starts a child Run that would outlive the execution."},
    {"check_subagent", "check_subagent addresses a child Run, which outlives the execution."},
    {"message_subagent", "message_subagent addresses a child Run, which outlives the execution."},
    {"remember", "remember acts on the model's own context, not on the program's data."},
    {"forget", "forget acts on the model's own context, not on the program's data."},
    {"update_tasks", "update_tasks acts on the model's own task list, not on the program's data."},
    {"load_skill", "load_skill changes the model's own context, not the program's."},
    {"show_component", "show_component addresses the person in the conversation, not the program."},
    {"run_code", "run_code cannot be called from a program: a program does not start another program."},
}};

/// The rule for a built-in, or nullopt when `name` is not one of the runtime's built-ins.
constexpr std::optional<builtin_rule> builtin_named(std::string_view name) noexcept {
  const auto* found = std::find_if(builtin_rules.begin(), builtin_rules.end(),
                                   [&](const builtin_rule& rule) { return rule.name == name; });
  if (found == builtin_rules.end()) return std::nullopt;
  return *found;
}

/// Why a program may not call this built-in; nullopt when it may, or when it is no built-in.
constexpr std::optional<std::string_view> exclusion_reason(std::string_view name) noexcept {
  const auto rule = builtin_named(name);
  if (!rule || rule->reason.empty()) return std::nullopt;
  return rule->reason;
}

}  // namespace psych
