#pragma once
// The terms of one execution: the intersection, in order, of
//   1. what the backend can provide (describe()),
//   2. what the tenant's policy grants,
//   3. what the agent's spec asks for,
//   4. what the profile's hard limits cap.
// Each step may only narrow. A request nobody can meet is a refusal, which is
// data for the model, never an exception.
#include <optional>
#include <string>
#include <variant>
#include <tuple>
#include <vector>

#include "psych/failure.hpp"
#include "psych/isolation.hpp"
#include "psych/limits.hpp"
#include "psych/host_pattern.hpp"
#include "psych/artifacts.hpp"
#include "psych/budget.hpp"
#include "psych/output.hpp"

namespace psych {

/// What a backend says it can provide; the first and widest term.
struct backend_offer {
  bool ready = false;
  isolation_level isolation = isolation_level::process;  ///< the strongest level it reaches
  sandbox_limits limit_ceiling;
  bool network = false;  ///< can it grant network at all
  /// Can it hold network=allowlist: a namespace that reaches only psych's egress proxy
  /// (docs/network.md). False at the PROCESS level, which shares the host's network.
  bool network_allowlist = false;
  /// The deployment's cap on the hosts an allowlist may name (host patterns); nullopt: none.
  std::optional<std::vector<std::string>> allowed_hosts;
  std::vector<std::string> problems;
};

/// What a tenant's policy allows. A CodeExecutionPolicy receives one and
/// returns one no wider.
struct code_execution_grant {
  sandbox_limits limits;
  bool allow_network = false;
  /// The hosts a network=allowlist execution may reach, when allow_network is false: nullopt
  /// leaves them to the profile and the spec (the grant a backend's offer makes); a list (host
  /// patterns) narrows to those.
  std::optional<std::vector<std::string>> allowed_hosts;
  binding_budget budget;  ///< the profile's BindingBudget, which the policy may narrow per tenant
};

/// The part of an agent's code_execution that shapes the terms.
struct code_execution_request {
  isolation_level isolation = isolation_level::process;  ///< a minimum
  code_execution_limits limits;                           ///< requests; absent = the profile's
  network_access network = network_access::none;
  std::vector<std::string> allowed_hosts;  ///< with network=allowlist
  std::optional<output_policy> output;
  std::optional<artifact_policy> artifacts;
};

/// The deployment's word on one profile.
struct profile_caps {
  /// The caps the deployment sets on this profile, per dimension. An unset one caps nothing:
  /// that dimension is what the backend, the policy and the spec leave.
  limit_caps hard_limits;
  bool allow_network = false;
  /// The hosts a network=allowlist execution may reach, when allow_network is false (host
  /// patterns). Empty: none, so a profile grants no network unless it says so.
  std::vector<std::string> allowed_hosts;
};

struct execution_terms {
  isolation_level isolation = isolation_level::process;  ///< the minimum the execution must reach
  sandbox_limits limits;
  network_access network = network_access::none;
  /// With network=allowlist: what the profile, the policy and the spec all allow, spelled
  /// canonically (host_pattern.hpp), never empty. Otherwise empty.
  std::vector<std::string> allowed_hosts;
  output_policy output;
  artifact_policy artifacts;
  friend bool operator==(const execution_terms&, const execution_terms&) = default;
};

using terms_decision = std::variant<execution_terms, refusal>;

namespace terms_detail {

/// A network=allowlist request narrowed by the policy's and the profile's grants: each allows every
/// host (allow_network) or its own list. An empty result, or a pattern that does not parse, is a
/// refusal naming who left nothing.
inline std::variant<std::vector<std::string>, refusal> allowed_hosts_of(const backend_offer& backend,
                                                                       const code_execution_grant& grant,
                                                                       const code_execution_request& asked,
                                                                       const profile_caps& profile) {
  const auto refused = [](std::string why) { return refusal{refusal_reason::network_not_granted, std::move(why)}; };
  if (!backend.network_allowlist)
    return refused(backend.isolation == isolation_level::process
                       ? "network=allowlist is not offered at isolation=process: the program would share the host's "
                         "network, where nothing but the program's own choice keeps it on the proxy (docs/network.md)"
                       : "the backend does not offer network=allowlist");
  auto hosts = canonical_host_list(asked.allowed_hosts);
  if (!hosts) return refused("network=allowlist: " + hosts.error().detail);
  if (hosts.value().empty()) return refused("network=allowlist names no host");
  const std::vector<std::string>* backend_list = backend.allowed_hosts ? &*backend.allowed_hosts : nullptr;
  const std::vector<std::string>* policy_list = grant.allowed_hosts ? &*grant.allowed_hosts : nullptr;
  for (const auto& [by, all, list] :
       {std::tuple{"the backend's configuration", !backend_list, backend_list},
        std::tuple{"the tenant policy", grant.allow_network || !policy_list, policy_list},
        std::tuple{"the profile", profile.allow_network, &profile.allowed_hosts}}) {
    if (all) continue;
    auto narrowed = intersect_host_lists(hosts.value(), *list);
    if (!narrowed) return refused(std::string(by) + "'s allowed_hosts: " + narrowed.error().detail);
    if (narrowed.value().empty())
      return refused(std::string("network access to none of the hosts asked for is granted by ").append(by));
    hosts = std::move(narrowed);
  }
  return std::move(hosts).value();
}

}  // namespace terms_detail

inline terms_decision intersect_terms(const backend_offer& backend, const code_execution_grant& grant,
                                      const code_execution_request& asked, const profile_caps& profile) {
  if (!backend.ready) {
    std::string why = "the sandbox backend is not ready";
    for (const auto& problem : backend.problems) why.append("; ").append(problem);
    return refusal{refusal_reason::backend_not_ready, std::move(why)};
  }
  if (asked.isolation > backend.isolation)
    return refusal{refusal_reason::isolation_unreachable,
                   std::string("the agent asks for isolation=").append(name_of(asked.isolation))
                       .append(" and this backend reaches only ").append(name_of(backend.isolation))};
  if (asked.network == network_access::unrestricted) {
    const char* denied_by = !backend.network        ? "the backend"
                            : !grant.allow_network  ? "the tenant policy"
                            : !profile.allow_network ? "the profile"
                                                     : nullptr;
    if (denied_by)
      return refusal{refusal_reason::network_not_granted,
                     std::string("network access is not granted by ").append(denied_by)};
  }

  execution_terms terms;
  if (asked.network == network_access::allowlist) {
    auto hosts = terms_detail::allowed_hosts_of(backend, grant, asked, profile);
    if (auto* refused = std::get_if<refusal>(&hosts)) return std::move(*refused);
    terms.allowed_hosts = std::get<std::vector<std::string>>(std::move(hosts));
  }
  terms.isolation = asked.isolation;
  terms.network = asked.network;
  terms.limits = backend.limit_ceiling;
  narrow(terms.limits, grant.limits);
  narrow(terms.limits, asked.limits);
  narrow(terms.limits, profile.hard_limits);
  if (asked.output) terms.output = *asked.output;
  if (asked.artifacts) terms.artifacts = *asked.artifacts;
  return terms;
}

/// Terms whose allowlist names a host beyond the backend's configured cap (backend_offer's
/// allowed_hosts): each pattern must be within the cap, not merely touch it. What every backend
/// checks before it runs terms it was handed, whoever computed them.
inline std::optional<refusal> allowlist_beyond_cap(const backend_offer& backend, const execution_terms& terms) {
  if (terms.network != network_access::allowlist || !backend.allowed_hosts) return std::nullopt;
  if (auto beyond = first_host_beyond(terms.allowed_hosts, *backend.allowed_hosts))
    return refusal{refusal_reason::network_not_granted,
                   "the backend's configuration does not allow the host pattern " + *beyond};
  return std::nullopt;
}

/// Whether a backend that offers `backend` can carry terms someone else already computed: what a
/// remote client checks in a service's description before it sends a program, and what the service
/// checks again before it runs one. The first refusal, or nullopt. Limits are not judged here: the
/// client narrows them to the ceiling, the service refuses what is beyond it.
inline std::optional<refusal> refusal_by_backend(const backend_offer& backend, const execution_terms& terms) {
  if (!backend.ready) {
    std::string why = "the backend is not ready";
    for (const auto& problem : backend.problems) why.append("; ").append(problem);
    return refusal{refusal_reason::backend_not_ready, std::move(why)};
  }
  if (terms.isolation > backend.isolation)
    return refusal{refusal_reason::isolation_unreachable, std::string("isolation=")
                                                              .append(name_of(terms.isolation))
                                                              .append(" is asked, and the backend reaches only ")
                                                              .append(name_of(backend.isolation))};
  if (terms.network == network_access::unrestricted && !backend.network)
    return refusal{refusal_reason::network_not_granted, "the backend does not grant network access"};
  if (terms.network == network_access::allowlist && !backend.network_allowlist)
    return refusal{refusal_reason::network_not_granted, "the backend does not offer network=allowlist"};
  if (terms.network == network_access::allowlist &&
      (terms.allowed_hosts.empty() || !canonical_host_list(terms.allowed_hosts)))
    return refusal{refusal_reason::network_not_granted, "network=allowlist without a valid list of hosts"};
  return allowlist_beyond_cap(backend, terms);
}

}  // namespace psych
