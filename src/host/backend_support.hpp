#pragma once
// What every backend of this host shares (defined in local_sandbox.cpp): where the launcher is,
// the child's environment built from nothing, and the mechanism report in words for describe().
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "psych/reports.hpp"
#include "psych/result.hpp"

namespace psych::host {

/// The launcher: `explicit_path` alone when given; else $PSYCH_LAUNCHER; else the package's, then
/// the one beside the running executable. An error names every path tried.
result<std::string> find_launcher(const std::optional<std::string>& explicit_path);

/// The allowlisted host variables plus what psych sets itself (PATH, PYTHONDONTWRITEBYTECODE,
/// LC_CTYPE); nothing else of this process's environment.
std::map<std::string, std::string> child_environment(const std::vector<std::string>& allowlist);

/// One line per mechanism the launcher (and its starter) applied.
std::vector<std::string> mechanism_names(const mechanism_report& m);

}  // namespace psych::host
