#include "psych/host/runtime.hpp"

#include <algorithm>
#include <set>

#include <boost/hana/for_each.hpp>
#include <boost/hana/at_key.hpp>
#include <boost/hana/keys.hpp>
#include <fmt/format.h>

#include "psych/builtins.hpp"
#include "os/sha256.hpp"
#include "psych/grading.hpp"
#include "psych/host/model_payload.hpp"
#include "psych/host/result_json.hpp"
#include "psych/protocol/json.hpp"

namespace psych {

namespace {

/// Whether `name` is addressed to a connected server (`server__tool`).
bool addressed_to_server(std::string_view name, const std::vector<std::string>& servers) {
  const auto split = name.find("__");
  return split != std::string_view::npos && split > 0 &&
         std::ranges::find(servers, name.substr(0, split)) != servers.end();
}

/// A binding the spec may list: a tool it is granted, a callable built-in, or a tool of a server
/// that is connected now (whether that server still offers it is not asked: publishing must not
/// depend on somebody else's uptime).
bool bindable(std::string_view name, const agent_spec& spec, const std::vector<std::string>& servers) {
  if (std::ranges::find(spec.tools, name, &tool_ref::name) != spec.tools.end()) return true;
  if (const auto rule = builtin_named(name)) return rule->reason.empty();
  return addressed_to_server(name, servers);
}

}  // namespace

namespace {

/// Every cap of `returned` no higher than the same cap of `offered`: one walk over any capped struct.
template <class Caps>
bool caps_within(const Caps& returned, const Caps& offered) {
  bool within = true;
  boost::hana::for_each(boost::hana::keys(returned), [&](auto key) {
    within = within && boost::hana::at_key(returned, key).value <= boost::hana::at_key(offered, key).value;
  });
  return within;
}

/// The hosts `returned` allows are among those `offered` allows: nullopt or allow_network is every
/// host; a list must be what it shares with the offered one (its own canonical spelling).
bool hosts_within(const code_execution_grant& returned, const code_execution_grant& offered) {
  if (offered.allow_network || !offered.allowed_hosts) return true;
  if (returned.allow_network || !returned.allowed_hosts) return false;
  return !first_host_beyond(*returned.allowed_hosts, *offered.allowed_hosts);
}

/// What is wrong with a spec's network=allowlist, if anything: a list without the allowlist (it
/// would be read as a grant it is not), the allowlist without a list, or a pattern that does not
/// parse. Found at publish, where the spec's author sees it, not at each run.
std::optional<std::string> allowed_hosts_mistake(const code_execution& code) {
  if (code.network != network_access::allowlist)
    return code.allowed_hosts ? std::optional<std::string>("code_execution.allowed_hosts is set and network is not "
                                                           "\"allowlist\": set network to \"allowlist\" to use it")
                              : std::nullopt;
  if (!code.allowed_hosts || code.allowed_hosts->empty())
    return "code_execution.network is \"allowlist\" and allowed_hosts names no host";
  if (auto hosts = canonical_host_list(*code.allowed_hosts); !hosts)
    return "code_execution.allowed_hosts: " + hosts.error().detail;
  return std::nullopt;
}

}  // namespace

bool grant_within(const code_execution_grant& returned, const code_execution_grant& offered) {
  return (!returned.allow_network || offered.allow_network) && hosts_within(returned, offered) &&
         caps_within(returned.limits, offered.limits) && caps_within(returned.budget, offered.budget);
}

result<runtime> runtime::create(runtime_setup setup) {
  if (setup.single) {
    if (!setup.profiles.empty())
      return fail_with(error_kind::invalid_argument, "give a runtime either profiles or one sandbox, not both");
    setup.profiles.push_back({.name = "default", .backend = std::move(setup.single)});
  }
  std::set<std::string> names;
  for (const auto& profile : setup.profiles) {
    if (!profile.backend)
      return fail_with(error_kind::invalid_argument, fmt::format("profile {:?} has no sandbox", profile.name));
    if (!names.insert(profile.name).second)
      return fail_with(error_kind::invalid_argument, fmt::format("profile {:?} is registered twice", profile.name));
    if (auto hosts = canonical_host_list(profile.allowed_hosts); !hosts)
      return fail_with(error_kind::invalid_argument,
                       fmt::format("profile {:?}'s allowed_hosts: {}", profile.name, hosts.error().detail));
  }
  for (const auto& server : setup.connected_servers)
    if (server.empty() || server.find("__") != std::string::npos)
      return fail_with(error_kind::invalid_argument,
                     fmt::format("server name {:?} cannot address tools: it is empty or holds \"__\"", server));
  return runtime(std::move(setup));
}

const sandbox_profile* runtime::profile(std::string_view name) const {
  const auto found = std::ranges::find(setup_.profiles, name, &sandbox_profile::name);
  return found == setup_.profiles.end() ? nullptr : &*found;
}

result<agent_version> runtime::publish(const agent_spec& spec) const {
  if (std::ranges::find(spec.tools, run_code_tool, &tool_ref::name) != spec.tools.end())
    return fail_with(error_kind::invalid_argument,
                   "run_code is a reserved tool name: a spec cannot claim it (code execution is turned on with "
                   "code_execution)");
  if (setup_.catalogue && setup_.tools_known_at_publish && !spec.tools.empty()) {
    const auto offered = setup_.catalogue->offered_now();
    for (const auto& tool : spec.tools) {
      if (addressed_to_server(tool.name, setup_.connected_servers)) continue;
      if (std::ranges::find(offered, tool.name, &binding::name) == offered.end())
        return fail_with(error_kind::invalid_argument,
                       fmt::format("the spec grants tool {:?}, and the runtime's catalogue has no tool of that name",
                                   tool.name));
    }
  }
  if (spec.code) {
    if (spec.code->bindings)
      for (const auto& name : *spec.code->bindings)
        if (!bindable(name, spec, setup_.connected_servers))
          return fail_with(error_kind::invalid_argument,
                         fmt::format("binding {:?} is neither a tool this agent is granted, a callable built-in, nor "
                                     "addressed to a connected server",
                                     name));
    if (auto hosts_refused = allowed_hosts_mistake(*spec.code))
      return fail_with(error_kind::invalid_argument, *std::move(hosts_refused));
    if (setup_.profiles_known_at_publish && !profile(spec.code->profile))
      return fail_with(error_kind::invalid_argument,
                     fmt::format("code_execution asks for profile {:?}, and no sandbox is registered under that name",
                                 spec.code->profile));
  }
  PSYCH_TRY(auto hash, host::sha256_hex(protocol::encode_json(spec)));
  return agent_version{spec, std::move(hash)};
}

std::vector<profile_status> runtime::verify_sandboxes() const {
  std::vector<profile_status> out;
  for (const auto& profile : setup_.profiles) out.push_back({profile.name, profile.backend->describe()});
  return out;
}

result<agent_attempt> runtime::start_attempt(const agent_version& version, run_log& log, std::string tenant) const {
  if (!version.spec.code) return agent_attempt(setup_, version, nullptr, std::move(tenant), std::nullopt);
  const auto* chosen = profile(version.spec.code->profile);
  if (!chosen)
    return fail_with(error_kind::sandbox_setup,
                   fmt::format("the Attempt cannot start: agent {:?} asks for sandbox profile {:?}, which is not "
                               "registered (a deployment mistake, never ignored)",
                               version.spec.name, version.spec.code->profile));
  std::optional<code_run> run;
  if (setup_.catalogue && setup_.invoker) {
    PSYCH_TRY(auto opened, code_run::attempt({.backend = chosen->backend.get(),
                                              .catalogue = setup_.catalogue,
                                              .invoker = setup_.invoker,
                                              .log = &log,
                                              .budget = chosen->budget,
                                              .blobs = setup_.blobs,
                                              .tenant = tenant}));
    run.emplace(std::move(opened));
  }
  return agent_attempt(setup_, version, chosen, std::move(tenant), std::move(run));
}

std::string run_code_payload(const run_code_outcome& outcome, const code_execution& asked) {
  if (const auto* refused = std::get_if<refusal>(&outcome)) return host::refusal_to_json(*refused);
  const auto& result = std::get<sandbox_result>(outcome);
  return host::model_payload(result, promised_on(promised_grades(asked.isolation, asked.network), result.strongest_grades));
}

std::vector<std::string> agent_attempt::tool_names() const {
  std::vector<std::string> names;
  for (const auto& tool : version_.spec.tools) names.push_back(tool.name);
  if (version_.spec.code) names.emplace_back(run_code_tool);
  return names;
}

const std::vector<call_started>& agent_attempt::unknown_calls() const noexcept {
  static const std::vector<call_started> none;
  return run_ ? run_->unknown_calls() : none;
}

result<meter_readings> agent_attempt::run_spent() const {
  if (!run_) return meter_readings{};
  return run_->run_spent();
}

result<run_code_outcome> agent_attempt::run_code(const std::string& program, std::stop_token stop,
                                                 output_sink* live_output) {
  if (!profile_)
    return fail_with(error_kind::invalid_argument, "this agent's spec has no code_execution: run_code is not its tool");
  const auto& asked = *version_.spec.code;
  const auto offer = profile_->backend->offer();
  const code_execution_grant offered{
      .limits = offer.limit_ceiling, .allow_network = offer.network, .budget = profile_->budget};
  auto grant = offered;
  if (setup_->policy) {
    grant = setup_->policy(tenant_, offered);
    if (!grant_within(grant, offered))
      return fail_with(error_kind::invalid_argument,
                     fmt::format("the CodeExecutionPolicy for tenant {:?} returned a grant wider than the one it "
                                 "received",
                                 tenant_));
  }
  auto decision = intersect_terms(
      offer, grant,
      {.isolation = asked.isolation,
       .limits = asked.limits,
       .network = asked.network,
       .allowed_hosts = asked.allowed_hosts.value_or(std::vector<std::string>{}),
       .output = asked.output,
       .artifacts = asked.artifacts},
      {.hard_limits = profile_->hard_limits,
       .allow_network = profile_->allow_network,
       .allowed_hosts = profile_->allowed_hosts});
  if (auto* refused = std::get_if<refusal>(&decision)) return run_code_outcome{*refused};
  auto terms = std::get<execution_terms>(std::move(decision));
  if (run_)
    return run_code_outcome{
        run_->run({.program = program,
                   .terms = terms,
                   .bindings = asked.bindings,
                   .budget = grant.budget,
                   .live_output = live_output},
                  std::move(stop))};
  run_request request{
      .program = program, .terms = terms, .blobs = setup_->blobs, .tenant = tenant_, .live_output = live_output};
  return run_code_outcome{profile_->backend->run(request, std::move(stop))};
}

}  // namespace psych
