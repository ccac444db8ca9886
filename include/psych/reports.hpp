#pragma once
// The two halves of a containment report: what the launcher applied
// (mechanism_report) and what the child observed from inside
// (child_report). Grading reads both; only the second can raise a grade to
// enforced. Field names are the contract's (docs/contract.md).
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <boost/hana/adapt_struct.hpp>

#include "psych/names.hpp"

namespace psych {

/// An rlimit as the child read it back: {soft, hard}, -1 meaning unlimited.
using rlimit_pair = std::array<std::int64_t, 2>;

struct applied_rlimits {
  std::int64_t cpu_seconds = -1;
  std::int64_t address_space_bytes = -1;
  std::int64_t file_size_bytes = -1;
  std::int64_t process_count = -1;
  std::int64_t open_files = -1;
  std::int64_t core_bytes = -1;
};

/// A Windows Job Object as QueryInformationJobObject reads it back after the launcher set it: by
/// the launcher for its job handle (mechanism_report.job), and by the child for the job it runs in
/// (child_report.job). Nothing here is what was asked for: a flag or limit that reads back unset
/// (Wine reads every limit back as 0) is false or -1, and is graded as absent.
struct job_readback {
  bool in_job = false;              ///< the launcher made one / the child observed being in one
  bool kill_on_close = false;       ///< JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
  bool breakaway_forbidden = false; ///< a job is set and neither BREAKAWAY_OK nor SILENT_BREAKAWAY_OK
  bool ui_restricted = false;       ///< every JOB_OBJECT_UILIMIT_* class
  std::int64_t active_processes_limit = -1;  ///< ActiveProcessLimit
  std::int64_t memory_bytes = -1;            ///< JobMemoryLimit: committed memory of the whole tree
  std::int64_t cpu_seconds = -1;             ///< PerJobUserTimeLimit, whole seconds rounded up
};

enum class seccomp_state { none, filter };
PSYCH_ENUM_NAMES(seccomp_state, "none", "filter");

struct mechanism_report {
  bool session = false;            ///< setsid() in the child
  bool subreaper = false;          ///< the launcher is PR_SET_CHILD_SUBREAPER
  bool no_new_privs = false;
  seccomp_state seccomp = seccomp_state::none;
  std::int64_t landlock_abi = 0;   ///< 0: not applied
  std::vector<std::string> namespaces;  ///< e.g. "user", "mount", "pid", "net"
  std::string cgroup = "none";     ///< "none", "v1", "v2"
  /// cgroup "none" on a cgroup v2 host: which cgroup held it back, which controller, what to configure.
  std::string cgroup_why_none;
  bool uid_drop = false;           ///< setuid to run_as happened
  bool fds_closed = false;
  bool environment_built = false;
  applied_rlimits rlimits;
  std::int64_t process_count_base = 0;  ///< the target uid's processes before the child
  /// The names directly under the root the launcher built (isolated); empty: the host's root.
  std::vector<std::string> root_entries;
  /// The launcher holds cpu_seconds for the whole tree, from its cgroup's CPU accounting.
  bool cpu_tree_limit = false;
  /// macOS: the interpreter runs under a seatbelt profile that denies reads of the secrets'
  /// subtrees, writes outside the workspace and the temp dir, and the network without a grant.
  bool seatbelt = false;
  /// Where there is no subreaper (macOS): the launcher finds the program's orphans by the run_as
  /// uid, which only this execution holds (launch.run_as.exclusive), and kills them with the tree.
  bool uid_sweep = false;
  /// false: the platform has no address-space limit its interpreter respects (macOS), so none was
  /// set; memory is graded unavailable, which keeps nothing below the PROCESS level.
  bool address_space_limit = true;
  /// The Windows launcher's Job Object, read back; in_job false everywhere else.
  job_readback job;
  /// network=allowlist: the listeners for psych's egress proxy the launcher made inside the
  /// sandbox's network namespace (127.0.0.1, and ::1 where the namespace has IPv6) and handed to
  /// the host. 0 otherwise.
  std::int64_t egress_listeners = 0;
};

struct child_rlimits {
  rlimit_pair cpu_seconds{-1, -1};
  rlimit_pair address_space_bytes{-1, -1};
  rlimit_pair file_size_bytes{-1, -1};
  rlimit_pair process_count{-1, -1};
  rlimit_pair open_files{-1, -1};
  rlimit_pair core_bytes{-1, -1};
};

struct canary_observation {
  bool readable = true;  ///< assume exposure until the child says otherwise
  std::int64_t error_number = 0;
};

enum class probe_outcome { denied, unreachable, refused, connected, timeout, error, skipped };
PSYCH_ENUM_NAMES(probe_outcome, "denied", "unreachable", "refused", "connected", "timeout", "error",
                 "skipped");

struct network_probe {
  probe_outcome outcome = probe_outcome::error;
  std::int64_t error_number = 0;
};

/// What the child saw when it asked psych's egress proxy for a host no allowlist names
/// (network=allowlist only): the proxy must refuse it, with an HTTP error.
enum class egress_probe_outcome { skipped, refused, allowed, unreachable, error };
PSYCH_ENUM_NAMES(egress_probe_outcome, "skipped", "refused", "allowed", "unreachable", "error");

struct egress_probe {
  egress_probe_outcome outcome = egress_probe_outcome::skipped;
  std::int64_t status = 0;        ///< the proxy's HTTP status, 0 when none came
  std::int64_t error_number = 0;  ///< connecting to the proxy failed with this
};

struct network_observation {
  network_probe ipv4;
  network_probe ipv6;
  egress_probe proxy;
};

struct child_report {
  std::int64_t pid = 0, ppid = 0, pgid = 0, sid = 0;
  std::int64_t uid = -1, gid = -1, euid = -1, egid = -1;
  std::vector<std::int64_t> groups;
  bool no_new_privs = false;
  std::int64_t seccomp_mode = -1;
  child_rlimits rlimits;
  canary_observation canary;
  network_observation network;
  std::vector<std::string> environment_keys;
  std::string cwd;
  bool cwd_is_workspace = false;  ///< same device and inode as the workspace the host made
  std::int64_t workspace_entries = -1;
  /// The child's own namespace ids by kind ("mnt" -> "mnt:[4026531841]"); the host compares
  /// them with its own, so a namespace counts only where the child observed a different one.
  std::map<std::string, std::string> namespace_ids;
  std::vector<std::string> root_entries;  ///< names under the child's "/", at most 256
  std::string uid_map;                    ///< /proc/self/uid_map, whitespace collapsed
  std::string gid_map;
  std::string capabilities_effective;  ///< CapEff from /proc/self/status, hex
  std::string capabilities_bounding;   ///< CapBnd
  std::int64_t network_routes = -1;    ///< IPv4 + IPv6 routes the child's namespace holds
  std::int64_t cgroup_memory_limit = -1;  ///< its cgroup's memory limit read from inside; -1 none
  std::int64_t cgroup_pids_limit = -1;
  /// Its cgroup's CPU time so far (µs) read from inside; -1: no accounting it can see.
  std::int64_t cgroup_cpu_usage_us = -1;
  std::string python;
  /// The Job Object the child runs in, read from inside (Windows); in_job false elsewhere.
  job_readback job;
};

}  // namespace psych

BOOST_HANA_ADAPT_STRUCT(psych::applied_rlimits, cpu_seconds, address_space_bytes, file_size_bytes,
                        process_count, open_files, core_bytes);
BOOST_HANA_ADAPT_STRUCT(psych::job_readback, in_job, kill_on_close, breakaway_forbidden, ui_restricted,
                        active_processes_limit, memory_bytes, cpu_seconds);
BOOST_HANA_ADAPT_STRUCT(psych::mechanism_report, session, subreaper, no_new_privs, seccomp,
                        landlock_abi, namespaces, cgroup, cgroup_why_none, uid_drop, fds_closed, environment_built,
                        rlimits, process_count_base, root_entries, cpu_tree_limit, seatbelt, uid_sweep,
                        address_space_limit, job, egress_listeners);
BOOST_HANA_ADAPT_STRUCT(psych::child_rlimits, cpu_seconds, address_space_bytes, file_size_bytes,
                        process_count, open_files, core_bytes);
BOOST_HANA_ADAPT_STRUCT(psych::canary_observation, readable, error_number);
BOOST_HANA_ADAPT_STRUCT(psych::network_probe, outcome, error_number);
BOOST_HANA_ADAPT_STRUCT(psych::egress_probe, outcome, status, error_number);
BOOST_HANA_ADAPT_STRUCT(psych::network_observation, ipv4, ipv6, proxy);
BOOST_HANA_ADAPT_STRUCT(psych::child_report, pid, ppid, pgid, sid, uid, gid, euid, egid, groups,
                        no_new_privs, seccomp_mode, rlimits, canary, network, environment_keys, cwd,
                        cwd_is_workspace, workspace_entries, namespace_ids, root_entries, uid_map,
                        gid_map, capabilities_effective, capabilities_bounding, network_routes,
                        cgroup_memory_limit, cgroup_pids_limit, cgroup_cpu_usage_us, python, job);
