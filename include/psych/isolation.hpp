#pragma once
// Isolation levels, enforcement grades and the guarantees a backend reports.
#include <boost/hana/accessors.hpp>
#include <boost/hana/adapt_struct.hpp>
#include <boost/hana/length.hpp>

#include "psych/names.hpp"

namespace psych {

/// What a Spec asks for as a minimum and what an execution reached. Ordered:
/// a higher enumerator is a stronger boundary.
enum class isolation_level {
  /// A separate process with limits, a scrubbed environment and a killable
  /// tree, but no kernel boundary.
  process,
  /// A kernel boundary (namespaces, a container), not this process's word.
  isolated,
};
PSYCH_ENUM_NAMES(isolation_level, "process", "isolated");

/// How strongly one guarantee held in one execution.
enum class enforcement {
  /// The execution observed the guarantee hold.
  enforced,
  /// The mechanism was requested and nothing contradicted it.
  unverified,
  /// The platform does not offer it, or the child observed it fail.
  unavailable,
};
PSYCH_ENUM_NAMES(enforcement, "enforced", "unverified", "unavailable");

/// The weaker of two grades.
constexpr enforcement weakest(enforcement a, enforcement b) noexcept { return a > b ? a : b; }

/// One grade per guarantee. Nothing is assumed: every field starts unavailable.
struct guarantee_grades {
  enforcement filesystem = enforcement::unavailable;
  enforcement network = enforcement::unavailable;
  enforcement process_tree = enforcement::unavailable;
  enforcement identity = enforcement::unavailable;
  enforcement cpu = enforcement::unavailable;
  enforcement memory = enforcement::unavailable;
  enforcement file_size = enforcement::unavailable;
  enforcement process_count = enforcement::unavailable;
  enforcement wall_clock = enforcement::unavailable;
  enforcement environment = enforcement::unavailable;
  friend constexpr bool operator==(const guarantee_grades&, const guarantee_grades&) = default;
};

/// Every guarantee enforced: the strongest grades of a backend whose platform holds none back.
inline constexpr guarantee_grades every_guarantee_enforced{
    enforcement::enforced, enforcement::enforced, enforcement::enforced, enforcement::enforced, enforcement::enforced,
    enforcement::enforced, enforcement::enforced, enforcement::enforced, enforcement::enforced, enforcement::enforced};

/// Network access an agent asks for and a profile may allow: none, everything, or only the hosts an
/// allowlist names (host_pattern.hpp, docs/network.md).
enum class network_access { none, unrestricted, allowlist };
PSYCH_ENUM_NAMES(network_access, "none", "unrestricted", "allowlist");

}  // namespace psych

BOOST_HANA_ADAPT_STRUCT(psych::guarantee_grades, filesystem, network, process_tree, identity, cpu, memory,
                        file_size, process_count, wall_clock, environment);
// every_guarantee_enforced names its grades by position: a guarantee added without it would start
// unavailable there, and make every backend's strongest grade for it a silent shortfall.
static_assert(boost::hana::length(boost::hana::accessors<psych::guarantee_grades>()) == 10,
              "every_guarantee_enforced must name each guarantee");
