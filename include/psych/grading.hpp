#pragma once
// Grading: the launcher's mechanism report and the child's own observations
// in, the achieved isolation level and one enforcement grade per guarantee
// out. Pure. The rules (docs/grading.md):
//   enforced    - the child observed the guarantee hold;
//   unverified  - the mechanism was requested and nothing contradicted it;
//   unavailable - not offered here, or the child observed it fail.
// A grade is only ever lowered by what was observed, never raised by what
// was requested.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/hana/accessors.hpp>
#include <boost/hana/at_key.hpp>
#include <boost/hana/first.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/keys.hpp>
#include <boost/hana/second.hpp>

#include "psych/isolation.hpp"
#include "psych/limits.hpp"
#include "psych/reports.hpp"

namespace psych {

/// What the host asked for, to compare the observations against.
struct grading_expectation {
  isolation_level requested = isolation_level::process;
  sandbox_limits limits;
  network_access network = network_access::none;
  std::optional<std::int64_t> run_as_uid;  ///< nullopt: the child keeps the worker's uid
  std::optional<std::int64_t> run_as_gid;
  std::int64_t worker_uid = 0;
  std::vector<std::string> environment_keys;  ///< every key the host set, sorted
  /// The host's own namespace ids by kind ("mnt", "pid", ...), read by the host: a namespace the
  /// launcher reports counts only where the child observed an id different from these.
  std::map<std::string, std::string> host_namespace_ids;
};

struct containment_grade {
  std::optional<isolation_level> achieved;  ///< nullopt: below the process floor
  guarantee_grades grades;
  bool network_denied = false;
  std::vector<std::string> problems;  ///< every contradiction observed, in words

  [[nodiscard]] bool reaches(isolation_level level) const { return achieved && *achieved >= level; }
};

namespace detail {

inline bool has(const std::vector<std::string>& list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

inline bool probe_blocked(probe_outcome o) {
  return o == probe_outcome::denied || o == probe_outcome::unreachable;
}
inline bool probe_exposed(probe_outcome o) {
  return o == probe_outcome::connected || o == probe_outcome::refused;
}

/// An rlimit the child read back matches what the launcher set (soft side).
inline bool readback_matches(const rlimit_pair& seen, std::int64_t set) {
  return set >= 0 && seen[0] == set && (seen[1] == -1 || seen[1] >= seen[0]);
}

/// The kind of /proc/self/ns/<kind> that a mechanism name stands for.
inline std::string_view namespace_kind(std::string_view mechanism) {
  return mechanism == "mount" ? std::string_view("mnt") : mechanism;
}

/// The launcher says it made the namespace, and the child sees another one than the host's.
inline bool namespace_held(const grading_expectation& e, const mechanism_report& m, const child_report& c,
                           std::string_view mechanism) {
  if (!has(m.namespaces, mechanism)) return false;
  const std::string kind(namespace_kind(mechanism));
  const auto child = c.namespace_ids.find(kind);
  const auto host = e.host_namespace_ids.find(kind);
  return child != c.namespace_ids.end() && host != e.host_namespace_ids.end() && !child->second.empty() &&
         !host->second.empty() && child->second != host->second;
}

/// Every namespace the launcher reported, held as the child observed it; each one that is not
/// is a problem in words.
inline bool namespaces_held(const grading_expectation& e, const mechanism_report& m, const child_report& c,
                            std::vector<std::string>& problems) {
  bool all = true;
  for (const auto& mechanism : m.namespaces)
    if (!namespace_held(e, m, c, mechanism)) {
      problems.push_back("namespaces: the launcher reports a " + mechanism +
                         " namespace, but the child observed the host's own (or none)");
      all = false;
    }
  return all;
}

/// The Windows launcher's Job Object holds `expected` for the whole tree: the launcher read it back
/// as set, and the child read the same from inside the job it runs in.
inline bool job_holds(const mechanism_report& m, const child_report& c, std::int64_t job_readback::*limit,
                      std::int64_t expected) {
  return m.job.in_job && c.job.in_job && expected >= 0 && m.job.*limit == expected && c.job.*limit == expected;
}

inline bool only_the_built_root(const mechanism_report& m, const child_report& c) {
  return !m.root_entries.empty() && !c.root_entries.empty() &&
         std::all_of(c.root_entries.begin(), c.root_entries.end(),
                     [&](const std::string& name) { return has(m.root_entries, name); });
}

inline enforcement grade_filesystem(const grading_expectation& e, const mechanism_report& m,
                                    const child_report& c, std::vector<std::string>& problems) {
  if (c.canary.readable) {
    problems.emplace_back("filesystem: the child read the host canary file");
    return enforcement::unavailable;
  }
  // Only a real boundary proves more than "this one file was out of reach": another mount
  // namespace whose root holds nothing but what the launcher put there.
  if (namespace_held(e, m, c, "mount") && only_the_built_root(m, c)) return enforcement::enforced;
  if (has(m.namespaces, "mount")) {
    std::string extra;
    for (const auto& name : c.root_entries)
      if (!has(m.root_entries, name)) extra.append(extra.empty() ? "" : ", ").append(name);
    problems.emplace_back("filesystem: the child's root is not the minimal root the launcher built" +
                          (extra.empty() ? std::string(" (it saw no root at all)") : " (it also holds: " + extra + ")"));
  }
  // Landlock, or a seatbelt profile, denied this one file: most of the filesystem may still be readable.
  if (m.landlock_abi > 0 || m.seatbelt) return enforcement::unverified;
  return enforcement::unavailable;  // an unreadable canary here is file permissions, not containment
}

/// network=allowlist: the program's namespace must be its own, hold no route out, and reach the
/// host's listener not at all; the proxy must refuse a host no list names. The namespace's own
/// loopback is up (the proxy's listener is on it), so a refused connection to the probe's port is
/// that loopback answering, not the host's: only `connected` is exposure here, and the host's own
/// count of connections to its listener (loopback_probe) lowers the grade besides.
inline enforcement grade_allowlist(const grading_expectation& e, const mechanism_report& m, const child_report& c,
                                   std::vector<std::string>& problems) {
  const auto& v4 = c.network.ipv4;
  const auto& v6 = c.network.ipv6;
  const auto& proxy = c.network.proxy;
  if (v4.outcome == probe_outcome::connected || v6.outcome == probe_outcome::connected) {
    problems.emplace_back(std::string("network: the child reached the host's loopback listener (ipv4: ")
                              .append(name_of(v4.outcome)).append(", ipv6: ").append(name_of(v6.outcome))
                              .append(")"));
    return enforcement::unavailable;
  }
  if (proxy.outcome == egress_probe_outcome::allowed) {
    problems.emplace_back("network: psych's egress proxy let the child through to a host no allowlist names");
    return enforcement::unavailable;
  }
  const auto closed = [](probe_outcome o) { return probe_blocked(o) || o == probe_outcome::refused; };
  const bool own_namespace = has(m.namespaces, "net") && namespace_held(e, m, c, "net");
  if (!own_namespace || c.network_routes != 0 || !closed(v4.outcome) || !closed(v6.outcome)) {
    problems.emplace_back("network: the child's network namespace is not one of its own without routes (" +
                          std::to_string(c.network_routes) + " routes seen)");
    return enforcement::unverified;
  }
  if (m.egress_listeners == 0 || proxy.outcome != egress_probe_outcome::refused) {
    problems.emplace_back(std::string("network: the child could not see psych's egress proxy refuse a host no "
                                      "allowlist names (")
                              .append(name_of(proxy.outcome)).append(", status ")
                              .append(std::to_string(proxy.status)).append(")"));
    return enforcement::unverified;
  }
  return enforcement::enforced;
}

inline enforcement grade_network(const grading_expectation& e, const mechanism_report& m,
                                 const child_report& c, std::vector<std::string>& problems) {
  if (e.network == network_access::unrestricted) return enforcement::unavailable;  // granted, not denied
  const auto& v4 = c.network.ipv4;
  const auto& v6 = c.network.ipv6;
  if (e.network == network_access::allowlist) return grade_allowlist(e, m, c, problems);
  if (probe_exposed(v4.outcome) || probe_exposed(v6.outcome)) {
    problems.emplace_back(std::string("network: the child reached the host's loopback listener (ipv4: ")
                              .append(name_of(v4.outcome)).append(", ipv6: ").append(name_of(v6.outcome))
                              .append(")"));
    return enforcement::unavailable;
  }
  const bool blocked = probe_blocked(v4.outcome) && probe_blocked(v6.outcome);
  if (has(m.namespaces, "net")) {
    // A network namespace is the boundary: it must be the child's own, and hold no route.
    if (blocked && namespace_held(e, m, c, "net") && c.network_routes == 0) return enforcement::enforced;
    problems.emplace_back("network: the child's network namespace is not an empty one of its own (" +
                          std::to_string(c.network_routes) + " routes seen)");
    return enforcement::unverified;
  }
  if (blocked) return enforcement::enforced;
  const bool mechanism = m.seccomp == seccomp_state::filter || has(m.namespaces, "net") || m.seatbelt;
  return mechanism ? enforcement::unverified : enforcement::unavailable;
}

inline enforcement grade_process_tree(const grading_expectation& e, const mechanism_report& m,
                                      const child_report& c, std::vector<std::string>& problems) {
  // Windows: a Job Object the tree cannot break away from, and whose last handle's close ends it.
  if (m.job.in_job) {
    const auto holds = [](const job_readback& job) { return job.in_job && job.kill_on_close && job.breakaway_forbidden; };
    if (holds(m.job) && holds(c.job)) return enforcement::enforced;
    if (c.job.in_job) {
      // Still the launcher ends the job and counts what is left (grade_exit lowers this then).
      problems.emplace_back("process_tree: the Job Object did not read back kill-on-close with breakaway forbidden");
      return enforcement::unverified;
    }
    problems.emplace_back("process_tree: the child did not observe itself in a Job Object");
    return enforcement::unavailable;
  }
  // In its own pid namespace, under the sandbox's init: init's end kills every process in it.
  if (has(m.namespaces, "pid")) {
    if (namespace_held(e, m, c, "pid") && c.ppid == 1) return enforcement::enforced;
    problems.emplace_back("process_tree: the child is not under its own init in a pid namespace of its own");
  }
  // Orphans come back to the launcher (a subreaper), or it finds them by the uid only this
  // execution holds. Without either it finds the session's group and the parent chains: a process
  // that left both escapes the sweep, so the tree is only requested, not proven.
  const bool finds_orphans = m.subreaper || m.uid_sweep;
  if (!m.session) return enforcement::unavailable;
  if (c.sid != c.pid || c.pgid != c.pid) {
    problems.emplace_back("process_tree: the child is not the leader of its own session");
    return enforcement::unavailable;
  }
  return finds_orphans ? enforcement::enforced : enforcement::unverified;
}

/// "0 <host id> 1": the namespace's root, and nothing else, mapped to one host id.
inline bool maps_only_root_to(const std::string& map, std::int64_t host_id) {
  return map == "0 " + std::to_string(host_id) + " 1";
}

inline bool no_capabilities(const std::string& hex) {
  return !hex.empty() && std::all_of(hex.begin(), hex.end(), [](char ch) { return ch == '0'; });
}

inline enforcement grade_identity(const grading_expectation& e, const mechanism_report& m,
                                  const child_report& c, std::vector<std::string>& problems) {
  if (!e.run_as_uid) return enforcement::unavailable;  // same uid as the worker: no drop exists
  if (has(m.namespaces, "user")) {
    // Root inside, the dedicated uid outside, and no capability left to use that root with.
    const bool mapped = namespace_held(e, m, c, "user") && maps_only_root_to(c.uid_map, *e.run_as_uid) &&
                        (!e.run_as_gid || maps_only_root_to(c.gid_map, *e.run_as_gid));
    const bool powerless = c.uid == 0 && c.euid == 0 && no_capabilities(c.capabilities_effective) &&
                           no_capabilities(c.capabilities_bounding);
    const bool groups_ok = std::all_of(c.groups.begin(), c.groups.end(), [](std::int64_t g) { return g == 0; });
    const bool lesser = *e.run_as_uid != 0 && *e.run_as_uid != e.worker_uid;
    if (m.uid_drop && mapped && powerless && groups_ok && lesser) return enforcement::enforced;
    problems.emplace_back("identity: the sandbox's root is not the requested lesser uid, or kept capabilities");
    return enforcement::unavailable;
  }
  const bool uid_ok = c.uid == *e.run_as_uid && c.euid == *e.run_as_uid;
  const bool gid_ok = !e.run_as_gid || (c.gid == *e.run_as_gid && c.egid == *e.run_as_gid);
  const bool groups_ok = std::all_of(c.groups.begin(), c.groups.end(),
                                     [&](std::int64_t g) { return e.run_as_gid && g == *e.run_as_gid; });
  const bool lesser = c.uid != 0 && c.uid != e.worker_uid;
  if (m.uid_drop && uid_ok && gid_ok && groups_ok && lesser) return enforcement::enforced;
  problems.emplace_back("identity: the child does not run as the requested lesser uid/gid");
  return enforcement::unavailable;
}

/// An rlimit is graded against both what the launcher says it set and what the
/// terms asked for. A per-process rlimit proves the cap on the interpreter,
/// not on the tree: unverified unless a tree-wide mechanism backs it.
inline enforcement grade_rlimit(const char* name, const rlimit_pair& seen, std::int64_t set,
                                std::int64_t expected, bool tree_wide, std::vector<std::string>& problems) {
  if (set != expected) {
    problems.emplace_back(std::string(name).append(": the launcher set a different limit than the terms"));
    return enforcement::unavailable;
  }
  if (!readback_matches(seen, set)) {
    problems.emplace_back(std::string(name).append(": the limit the child read back differs from the one set"));
    return enforcement::unavailable;
  }
  return tree_wide ? enforcement::enforced : enforcement::unverified;
}

inline enforcement grade_environment(const grading_expectation& e, const child_report& c,
                                     std::vector<std::string>& problems) {
  std::vector<std::string> extra;
  for (const auto& key : c.environment_keys)
    if (!has(e.environment_keys, key)) extra.push_back(key);
  if (extra.empty()) return enforcement::enforced;
  std::string names;  // names only: a value may be a credential
  for (const auto& key : extra) names.append(names.empty() ? "" : ", ").append(key);
  problems.emplace_back("environment: unexpected variables reached the child: " + names);
  return enforcement::unavailable;
}

}  // namespace detail

inline containment_grade grade_containment(const grading_expectation& e, const mechanism_report& m,
                                           const child_report& c) {
  containment_grade out;
  auto& g = out.grades;
  auto& problems = out.problems;
  const bool cgroup = m.cgroup != "none";
  if (!cgroup && !m.cgroup_why_none.empty()) problems.push_back("cgroup: none: " + m.cgroup_why_none);

  const bool namespaces = detail::namespaces_held(e, m, c, problems);
  g.filesystem = detail::grade_filesystem(e, m, c, problems);
  g.network = detail::grade_network(e, m, c, problems);
  g.process_tree = detail::grade_process_tree(e, m, c, problems);
  g.identity = detail::grade_identity(e, m, c, problems);
  const auto& want = e.limits;
  const auto& set = m.rlimits;
  const auto& seen = c.rlimits;
  // RLIMIT_CPU is per process: a tree of spinners gets one allowance each. Only the launcher's
  // reading of the cgroup's CPU time, held outside the sandbox like the wall clock, covers the
  // tree, and it counts only where the child itself read that same accounting from inside.
  const auto cpu_seconds = static_cast<std::int64_t>(std::ceil(want.cpu_seconds.value));
  const bool cpu_tree = (m.cpu_tree_limit && c.cgroup_cpu_usage_us >= 0) ||
                        detail::job_holds(m, c, &job_readback::cpu_seconds, cpu_seconds);
  if (m.cpu_tree_limit && !cpu_tree)
    problems.emplace_back("cpu: the child could not read the CPU accounting the launcher budgets the tree by");
  g.cpu = detail::grade_rlimit("cpu", seen.cpu_seconds, set.cpu_seconds, cpu_seconds, cpu_tree, problems);
  // The cgroup's memory limit covers the whole tree (and /tmp's pages), but only counts where the
  // child read the very limit back from inside.
  const auto memory_bytes = static_cast<std::int64_t>(want.address_space_bytes.value);
  const bool memory_cgroup = cgroup && c.cgroup_memory_limit == memory_bytes;
  if (cgroup && !memory_cgroup)
    problems.emplace_back("memory: the child did not read its cgroup's memory limit back as set");
  const bool memory_job = detail::job_holds(m, c, &job_readback::memory_bytes, memory_bytes);
  g.memory = m.address_space_limit ? detail::grade_rlimit("memory", seen.address_space_bytes, set.address_space_bytes,
                                                          memory_bytes, memory_cgroup || memory_job, problems)
                                   : enforcement::unavailable;
  // A file-size cap is per write, not per tree: the rlimit read back is the whole guarantee.
  g.file_size = detail::grade_rlimit("file_size", seen.file_size_bytes, set.file_size_bytes,
                                     static_cast<std::int64_t>(want.file_size_bytes.value), true, problems);
  // RLIMIT_NPROC binds a uid, so it is only as good as the identity it counts;
  // the launcher adds the uid's existing processes to the requested count.
  const auto nproc = detail::grade_rlimit(
      "process_count", seen.process_count, set.process_count,
      static_cast<std::int64_t>(want.process_count.value) + m.process_count_base, true, problems);
  // A Job Object's active process limit counts the tree, whatever account it runs as; so does the
  // cgroup's pids.max, where the child read it back from inside equal to the count plus the base
  // (the sandbox's init, which the cgroup holds too), as memory is graded from memory.max.
  const auto process_count = static_cast<std::int64_t>(want.process_count.value);
  const bool process_count_job = detail::job_holds(m, c, &job_readback::active_processes_limit, process_count);
  const bool process_count_cgroup = cgroup && c.cgroup_pids_limit == process_count + m.process_count_base;
  g.process_count = weakest(nproc, process_count_job || process_count_cgroup ? enforcement::enforced
                                   : e.run_as_uid                            ? g.identity
                                                                             : enforcement::unverified);
  // The clock is held outside the sandbox, by the launcher and the host.
  g.wall_clock = enforcement::enforced;
  g.environment = detail::grade_environment(e, c, problems);
  out.network_denied = e.network == network_access::none && g.network != enforcement::unavailable;

  // One program per execution starts in a fresh, empty workspace, or not at all.
  const bool fresh_workspace = c.cwd_is_workspace && c.workspace_entries == 0;
  if (!fresh_workspace) problems.emplace_back("workspace: the child does not start in the fresh, empty workspace");
  // Windows has no file-size cap (no rlimit, nothing in a Job Object): there file_size is
  // unavailable, honestly, and the floor stands on the job without it (docs/windows-launcher.md).
  const bool file_size_offered = !m.job.in_job;
  const bool floor = fresh_workspace && g.process_tree != enforcement::unavailable &&
                     g.environment == enforcement::enforced &&
                     g.cpu != enforcement::unavailable &&
                     (g.memory != enforcement::unavailable || !m.address_space_limit) &&
                     (g.file_size != enforcement::unavailable || !file_size_offered) && c.pid > 0;
  // A kernel boundary: namespaces the child observed as its own, a filesystem and network it
  // could not reach out of, a tree under its own init, and a dedicated uid where the worker could
  // give one (an unprivileged worker maps its own uid: identity stays unavailable, honestly).
  // Its own user namespace, or (a rootful container) a dedicated lesser uid of the host's with no
  // capability at all: either way nothing in the sandbox holds a privilege over the host's objects.
  const bool unprivileged = detail::has(m.namespaces, "user") ||
                            (g.identity == enforcement::enforced && e.run_as_uid &&
                             detail::no_capabilities(c.capabilities_effective) &&
                             detail::no_capabilities(c.capabilities_bounding));
  const bool boundary = namespaces && g.filesystem == enforcement::enforced &&
                        g.process_tree == enforcement::enforced &&
                        (g.identity == enforcement::enforced || !e.run_as_uid) &&
                        (g.network == enforcement::enforced || e.network == network_access::unrestricted) &&
                        unprivileged && detail::has(m.namespaces, "pid") &&
                        detail::has(m.namespaces, "mount") && detail::has(m.namespaces, "net");
  if (floor) out.achieved = boundary ? isolation_level::isolated : isolation_level::process;
  else problems.emplace_back("below the process floor: separate process tree, scrubbed environment and limits");
  return out;
}

/// After the execution: a descendant that survived the kill means the tree
/// was not contained, whatever the child reported at the start.
inline void grade_exit(containment_grade& grade, std::int64_t survivors) {
  if (survivors > 0) {
    grade.grades.process_tree = enforcement::unavailable;
    grade.problems.push_back("process_tree: " + std::to_string(survivors) +
                             " descendant(s) survived the execution");
  }
}

/// The weakest grade of each guarantee that asking for `level` (and `network`) promises: the
/// level rules above as grades (docs/grading.md, "Achieved level"). An execution that reached the
/// level meets them when its program starts, with one exception: PROCESS does not need the network
/// denied to be reached, but an agent that asked for no network was promised an attempt at denial,
/// so a working stack is below what it asked. A grade lowered later (a descendant survived, the
/// host's listener was reached, the wall clock was outrun) falls below the promise too.
/// Identity and process_count promise nothing: an unprivileged worker at ISOLATED, or a same-uid
/// run at PROCESS, reaches its level with both honestly unavailable.
constexpr guarantee_grades promised_grades(isolation_level level, network_access network) noexcept {
  using enum enforcement;
  const bool isolated = level == isolation_level::isolated;
  const bool denied = network != network_access::unrestricted;  // an allowlist denies every direct connection
  return {.filesystem = isolated ? enforced : unavailable,
          .network = !denied ? unavailable : isolated ? enforced : unverified,
          .process_tree = isolated ? enforced : unverified,
          .identity = unavailable,
          .cpu = unverified,
          .memory = unverified,
          .file_size = unverified,
          .process_count = unavailable,
          .wall_clock = enforced,
          .environment = enforced};
}

/// What the ask promised (promised_grades) on a backend whose platform can give each guarantee at
/// most `strongest`: the weaker of the two, guarantee by guarantee. A backend cannot owe what its
/// platform does not offer (macOS caps no memory, Windows no file size), and the result's grades
/// still say so; what stays a shortfall is a grade below both.
inline guarantee_grades promised_on(guarantee_grades promised, const guarantee_grades& strongest) {
  boost::hana::for_each(boost::hana::keys(promised), [&](auto key) {
    auto& owed = boost::hana::at_key(promised, key);
    owed = weakest(owed, boost::hana::at_key(strongest, key));
  });
  return promised;
}

/// One guarantee graded below its promise.
struct grade_shortfall {
  std::string_view guarantee;  ///< its name, as in guarantee_grades and the result's JSON
  enforcement got;
  enforcement promised;
  friend bool operator==(const grade_shortfall&, const grade_shortfall&) = default;
};

/// Every guarantee whose grade is weaker than `promised`'s, in guarantee_grades' order.
inline std::vector<grade_shortfall> below_promise(const guarantee_grades& got, const guarantee_grades& promised) {
  std::vector<grade_shortfall> out;
  boost::hana::for_each(boost::hana::accessors<guarantee_grades>(), [&](auto field) {
    const enforcement grade = boost::hana::second(field)(got);
    const enforcement floor = boost::hana::second(field)(promised);
    if (grade > floor) out.push_back({boost::hana::to<char const*>(boost::hana::first(field)), grade, floor});
  });
  return out;
}

}  // namespace psych
