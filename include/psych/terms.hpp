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
#include <vector>

#include "psych/failure.hpp"
#include "psych/isolation.hpp"
#include "psych/limits.hpp"
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
  std::vector<std::string> problems;
};

/// What a tenant's policy allows. A CodeExecutionPolicy receives one and
/// returns one no wider.
struct code_execution_grant {
  sandbox_limits limits;
  bool allow_network = false;
  binding_budget budget;  ///< the profile's BindingBudget, which the policy may narrow per tenant
};

/// The part of an agent's code_execution that shapes the terms.
struct code_execution_request {
  isolation_level isolation = isolation_level::process;  ///< a minimum
  code_execution_limits limits;                           ///< requests; absent = the profile's
  network_access network = network_access::none;
  std::optional<output_policy> output;
  std::optional<artifact_policy> artifacts;
};

/// The deployment's word on one profile.
struct profile_caps {
  /// The caps the deployment sets on this profile, per dimension. An unset one caps nothing:
  /// that dimension is what the backend, the policy and the spec leave.
  limit_caps hard_limits;
  bool allow_network = false;
};

struct execution_terms {
  isolation_level isolation = isolation_level::process;  ///< the minimum the execution must reach
  sandbox_limits limits;
  network_access network = network_access::none;
  output_policy output;
  artifact_policy artifacts;
  friend bool operator==(const execution_terms&, const execution_terms&) = default;
};

using terms_decision = std::variant<execution_terms, refusal>;

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
  return std::nullopt;
}

}  // namespace psych
