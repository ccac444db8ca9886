#pragma once
// The runtime face: what a runtime author wires. The deployment registers backends under profile
// names with their hard limits; an agent's spec asks for a profile and terms no wider. Publishing
// checks the spec and fixes its Version hash; an Attempt resolves the profile (loudly, if it is
// unknown) and offers run_code only to an agent whose spec has code execution. A run_code call's
// terms are the four-way intersection (backend, tenant policy, spec, profile), and a backend
// that cannot meet them is a refusal returned as data. docs/runtime.md shows it beside the spec.
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "psych/agent.hpp"
#include "psych/host/run_code.hpp"
#include "psych/host/sandbox.hpp"

namespace psych {

/// One backend under a logical name, with the deployment's word on it.
struct sandbox_profile {
  std::string name;
  std::shared_ptr<sandbox> backend;
  limit_caps hard_limits;  ///< per dimension; an unset one leaves the backend's ceiling (terms.hpp)
  bool allow_network = false;
  /// The hosts a network=allowlist execution under this profile may reach (host patterns,
  /// docs/network.md), when allow_network is false. Empty: none.
  std::vector<std::string> allowed_hosts;
  binding_budget budget;  ///< the BindingBudget for programs run under this profile
};

/// A tenant's CodeExecutionPolicy: receives the grant so far and returns one no wider. A policy
/// that returns a wider grant is a deployment error, reported as one.
using code_execution_policy = std::function<code_execution_grant(std::string_view tenant, const code_execution_grant&)>;

struct runtime_setup {
  /// Either profiles, or `single`: one sandbox that registers as the profile named "default".
  std::vector<sandbox_profile> profiles;
  std::shared_ptr<psych::sandbox> single;  ///< registers as the profile "default"
  code_execution_policy policy;  ///< none: the grant is the backend's whole offer
  /// False when profiles are registered after publishing (a profile name is then checked when an
  /// Attempt starts, never silently ignored).
  bool profiles_known_at_publish = true;
  /// The MCP servers (and A2A peers) connected now: a binding `server__tool` addressed to one of
  /// them is accepted at publish without asking whether the server still offers it.
  std::vector<std::string> connected_servers;
  tool_catalogue* catalogue = nullptr;  ///< the tools the agent can call now, for programs
  /// True when `catalogue` already holds every tool a spec may be granted when specs are
  /// published: publishing then reads it once, and a spec tool it does not offer is a publish
  /// error naming the tool, not an unavailable_binding at run time. False when tools are
  /// registered after publishing. Tools addressed to a connected server (`server__tool`) are never
  /// checked at publish: publication must not depend on somebody else's uptime.
  bool tools_known_at_publish = true;
  tool_invoker* invoker = nullptr;      ///< the runtime's direct tool path
  blob_store* blobs = nullptr;
};

struct agent_version {
  agent_spec spec;
  std::string hash;  ///< SHA-256 of the spec's canonical JSON; stable across processes and builds
};

/// What verify_sandboxes() found for one profile: its describe(), no program run.
struct profile_status {
  std::string profile;
  description described;
};

/// What one run_code call returns to the model: a refusal (nothing ran), or the result.
using run_code_outcome = std::variant<refusal, sandbox_result>;

class agent_attempt;

class runtime {
 public:
  /// Fails on duplicate profile names, both `profiles` and `single`, or a profile without a backend.
  static result<runtime> create(runtime_setup setup);

  /// The Version of a spec. Fails (invalid_argument, with the reason) when the spec claims
  /// run_code, lists a binding that is neither a granted tool, a callable built-in nor addressed to
  /// a connected server, is granted a tool the catalogue does not have (when it knows its tools),
  /// or names a profile this runtime does not have (when it knows its profiles).
  result<agent_version> publish(const agent_spec& spec) const;

  /// describe() of every profile, at startup: readiness without running any model-written code.
  std::vector<profile_status> verify_sandboxes() const;

  /// One Attempt of a Run of `version` for `tenant`, journalled in `log`. An unknown profile stops
  /// it here, loudly (sandbox_setup), whatever publish could check.
  result<agent_attempt> start_attempt(const agent_version& version, run_log& log, std::string tenant) const;

  const sandbox_profile* profile(std::string_view name) const;

 private:
  explicit runtime(runtime_setup setup) : setup_(std::move(setup)) {}
  runtime_setup setup_;
};

class agent_attempt {
 public:
  /// The tools the model is shown: the spec's own, and run_code only when the spec has code execution.
  std::vector<std::string> tool_names() const;

  /// One run_code call. A refusal (no network grant, an isolation level the backend cannot reach,
  /// a backend that is not ready) is data; a policy that widened the grant is an error.
  /// `live_output`: the program's output as it runs (live_output.hpp); not owned.
  result<run_code_outcome> run_code(const std::string& program, std::stop_token stop = {},
                                    output_sink* live_output = nullptr);

  /// The calls an earlier Attempt of this Run left in flight, which opening this one recorded as
  /// unknown_outcome (code_run::unknown_calls); empty when it has no code_run (no code execution, or
  /// a runtime with no tools: then nothing of the Run is journalled or metered).
  [[nodiscard]] const std::vector<call_started>& unknown_calls() const noexcept;
  /// The Run's meters, recounted from its log (code_run::run_spent); zeros without a code_run.
  result<meter_readings> run_spent() const;

 private:
  friend class runtime;
  agent_attempt(const runtime_setup& setup, const agent_version& version, const sandbox_profile* profile,
                std::string tenant, std::optional<code_run> run)
      : setup_(&setup), version_(version), profile_(profile), tenant_(std::move(tenant)), run_(std::move(run)) {}
  const runtime_setup* setup_;
  agent_version version_;
  const sandbox_profile* profile_;  ///< null when the spec has no code execution
  std::string tenant_;
  std::optional<code_run> run_;
};

/// What the model reads back from one run_code call, as one JSON object: the refusal
/// ({"refused": {reason, message}}), or the result, compact (model_payload.hpp): each preview once,
/// handles only for preserved bytes, grades only where one is below what `asked` (the spec's
/// code_execution) promised. The sandbox_result itself keeps everything.
std::string run_code_payload(const run_code_outcome& outcome, const code_execution& asked);

/// Whether `returned` is within `offered`: every limit no higher, network not turned on, and no
/// host allowed that `offered` did not.
bool grant_within(const code_execution_grant& returned, const code_execution_grant& offered);

}  // namespace psych
