#pragma once
// The agent's side of code execution: what an AgentSpec says, as values. An agent asks for a
// named profile and terms no wider than it; it never holds a backend, a client or a credential.
// `code_execution` is part of the published Version's hash: an agent that can write and run a
// program is a different agent from one that cannot.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/hana/adapt_struct.hpp>

#include "psych/artifacts.hpp"
#include "psych/isolation.hpp"
#include "psych/limits.hpp"
#include "psych/names.hpp"
#include "psych/omittable.hpp"
#include "psych/output.hpp"

namespace psych {

/// The tool name no spec may claim.
inline constexpr std::string_view run_code_tool = "run_code";

struct model_ref {
  std::string model;
  std::string provider;
  friend bool operator==(const model_ref&, const model_ref&) = default;
};

enum class tool_kind { code, http };
PSYCH_ENUM_NAMES(tool_kind, "code", "http");

/// A tool the agent is granted by its spec: a registered CodeTool, or an HttpTool.
struct tool_ref {
  tool_kind kind = tool_kind::code;
  std::string name;
  std::string url;  ///< HttpTool only
  friend bool operator==(const tool_ref&, const tool_ref&) = default;
};

/// CodeExecution: the agent opts in to run_code, under a named profile.
struct code_execution {
  std::string profile = "default";
  isolation_level isolation = isolation_level::process;  ///< a minimum
  /// nullopt: every tool the agent can call at each turn; a list narrows that, never widens it.
  std::optional<std::vector<std::string>> bindings;
  code_execution_limits limits;
  network_access network = network_access::none;
  /// With network=allowlist, the host patterns asked for (host_pattern.hpp). Written only when
  /// set, so a Spec without it keeps the Version hash it always had.
  omittable<std::vector<std::string>> allowed_hosts;
  std::optional<output_policy> output;
  std::optional<artifact_policy> artifacts;
  friend bool operator==(const code_execution&, const code_execution&) = default;
};

struct agent_spec {
  std::string name;
  model_ref model;
  std::vector<tool_ref> tools;
  std::optional<code_execution> code;  ///< the spec's `code_execution`; none: run_code is never shown
  friend bool operator==(const agent_spec&, const agent_spec&) = default;
};

}  // namespace psych

BOOST_HANA_ADAPT_STRUCT(psych::model_ref, model, provider);
BOOST_HANA_ADAPT_STRUCT(psych::tool_ref, kind, name, url);
BOOST_HANA_ADAPT_STRUCT(psych::code_execution, profile, isolation, bindings, limits, network, allowed_hosts, output,
                        artifacts);
BOOST_HANA_ADAPT_STRUCT(psych::agent_spec, name, model, tools, code);
