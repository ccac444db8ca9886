#pragma once
// What every backend of this host shares: where the launcher is,
// the child's environment built from nothing, and the mechanism report in words for describe().
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "psych/host/sandbox.hpp"
#include "psych/reports.hpp"
#include "psych/result.hpp"
#include "execution/session.hpp"

namespace psych::host {

/// The launcher: `explicit_path` alone when given; else $PSYCH_LAUNCHER; else the package's, then
/// the one beside the running executable. An error names every path tried.
result<std::string> find_launcher(const std::optional<std::string>& explicit_path);

/// The allowlisted host variables plus what psych sets itself (PATH, PYTHONDONTWRITEBYTECODE, and
/// LC_CTYPE on POSIX, SystemRoot on Windows); nothing else of this process's environment.
std::map<std::string, std::string> child_environment(const std::vector<std::string>& allowlist);

/// One line per mechanism the launcher (and its starter) applied.
std::vector<std::string> mechanism_names(const mechanism_report& m);

/// A result for an execution refused before anything started.
sandbox_result refused_result(failure_kind kind, std::string message);

/// What every backend refuses before it starts anything: limits that are not valid, REQUIRED
/// preservation with no BlobStore, network access unless the backend `grants_network` (no
/// backend of this host does; the remote one asks its service's description), and
/// network=allowlist unless `offer` holds it and its cap allows every host asked for. And a
/// program that is not UTF-8: the syntax_error Python raises for it, naming the first ill-formed
/// byte's offset.
std::optional<sandbox_result> refusal_every_backend_makes(const run_request& request, std::string_view backend,
                                                   bool grants_network = false, const backend_offer* offer = nullptr);

/// What the request's calls go through: its bindings, invoker (or relay), budget, Run (its
/// execution id minted when the Run has none), BlobStore and tenant.
gateway_setup gateway_setup_of(const run_request& request);

/// The request's program and gateway_setup_of() into a plan whose backend part is already filled.
void add_request(session_plan& plan, const run_request& request);

}  // namespace psych::host
