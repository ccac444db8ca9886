#include <doctest/doctest.h>

#include <algorithm>

#include "psych/grading.hpp"

using namespace psych;

namespace {

constexpr std::int64_t run_as = 1'500'000;

grading_expectation expectation() {
  grading_expectation e;
  e.run_as_uid = run_as;
  e.run_as_gid = run_as;
  e.worker_uid = 0;
  e.environment_keys = {"HOME", "LC_CTYPE", "PATH", "PYTHONDONTWRITEBYTECODE", "TMPDIR"};
  return e;
}

/// What the Linux PROCESS launcher reports when everything it tried worked.
mechanism_report applied() {
  mechanism_report m;
  m.session = m.subreaper = m.no_new_privs = m.uid_drop = m.fds_closed = m.environment_built = true;
  m.seccomp = seccomp_state::filter;
  m.rlimits = {.cpu_seconds = 10, .address_space_bytes = 512 << 20, .file_size_bytes = 10 << 20,
               .process_count = 67, .open_files = 256, .core_bytes = 0};
  m.process_count_base = 3;
  return m;
}

/// What a well-contained child observes.
child_report observed() {
  child_report c;
  c.pid = c.pgid = c.sid = 4242;
  c.uid = c.euid = c.gid = c.egid = run_as;
  c.no_new_privs = true;
  c.seccomp_mode = 2;
  c.rlimits = {.cpu_seconds = {10, 11}, .address_space_bytes = {512 << 20, 512 << 20},
               .file_size_bytes = {10 << 20, 10 << 20}, .process_count = {67, 67}, .open_files = {256, 256},
               .core_bytes = {0, 0}};
  c.canary = {.readable = false, .error_number = 13};
  c.network = {.ipv4 = {probe_outcome::denied, 13}, .ipv6 = {probe_outcome::denied, 13}};
  c.environment_keys = {"HOME", "LC_CTYPE", "PATH", "PYTHONDONTWRITEBYTECODE", "TMPDIR"};
  c.cwd_is_workspace = true;
  c.workspace_entries = 0;
  return c;
}

/// The host's namespace ids, and what an ISOLATED launcher and its child report.
const std::map<std::string, std::string> host_ids{{"mnt", "mnt:[1]"}, {"pid", "pid:[2]"}, {"net", "net:[3]"},
                                                  {"user", "user:[4]"}, {"ipc", "ipc:[5]"},
                                                  {"uts", "uts:[6]"}, {"cgroup", "cgroup:[7]"}};

grading_expectation isolated_expectation() {
  auto e = expectation();
  e.requested = isolation_level::isolated;
  e.host_namespace_ids = host_ids;
  return e;
}

mechanism_report isolated_applied() {
  auto m = applied();
  m.namespaces = {"user", "mount", "pid", "net", "ipc", "uts", "cgroup"};
  m.root_entries = {"dev", "etc", "lib", "proc", "tmp", "usr", "workspace"};
  m.cgroup = "v1";
  m.process_count_base = 1;
  m.rlimits.process_count = 65;
  return m;
}

child_report isolated_observed() {
  auto c = observed();
  for (const auto& [kind, id] : host_ids) c.namespace_ids[kind] = id + "'";  // all different
  c.pid = 2;
  c.ppid = 1;
  c.uid = c.euid = c.gid = c.egid = 0;
  c.uid_map = "0 1500000 1";
  c.gid_map = "0 1500000 1";
  c.capabilities_effective = c.capabilities_bounding = "0000000000000000";
  c.root_entries = {"dev", "lib", "proc", "tmp", "usr", "workspace"};
  c.network_routes = 0;
  c.canary = {.readable = false, .error_number = 2};
  c.rlimits.process_count = {65, 65};
  c.cgroup_memory_limit = 512 << 20;
  c.cgroup_pids_limit = 65;
  c.cgroup_cpu_usage_us = 1234;
  return c;
}

}  // namespace

TEST_CASE("a well-contained PROCESS child") {
  const auto g = grade_containment(expectation(), applied(), observed());
  CHECK(g.achieved == isolation_level::process);
  CHECK(g.problems.empty());
  CHECK(g.grades.process_tree == enforcement::enforced);
  CHECK(g.grades.identity == enforcement::enforced);
  CHECK(g.grades.network == enforcement::enforced);
  CHECK(g.network_denied);
  CHECK(g.grades.environment == enforcement::enforced);
  CHECK(g.grades.file_size == enforcement::enforced);
  CHECK(g.grades.process_count == enforcement::enforced);
  CHECK(g.grades.wall_clock == enforcement::enforced);
  SUBCASE("per-process rlimits are not a tree-wide guarantee") {
    CHECK(g.grades.cpu == enforcement::unverified);
    CHECK(g.grades.memory == enforcement::unverified);
  }
  SUBCASE("an unreadable canary without a boundary proves nothing about the filesystem") {
    CHECK(g.grades.filesystem == enforcement::unavailable);
  }
  CHECK_FALSE(g.reaches(isolation_level::isolated));
}

TEST_CASE("Landlock at PROCESS: the canary rule, never a boundary") {
  auto m = applied();
  m.landlock_abi = 7;
  SUBCASE("an unreadable canary is unverified, and PROCESS is still the level reached") {
    const auto g = grade_containment(expectation(), m, observed());
    CHECK(g.grades.filesystem == enforcement::unverified);
    CHECK(g.achieved == isolation_level::process);
    CHECK(g.problems.empty());
  }
  SUBCASE("a child listing only a minimal root does not make a path rule a mount boundary") {
    m.root_entries = {"proc", "tmp", "usr", "workspace"};
    auto c = observed();
    c.root_entries = {"usr", "workspace"};
    const auto g = grade_containment(expectation(), m, c);
    CHECK(g.grades.filesystem == enforcement::unverified);
    CHECK_FALSE(g.reaches(isolation_level::isolated));
  }
  SUBCASE("a readable canary is unavailable, whatever Landlock was applied") {
    auto c = observed();
    c.canary = {.readable = true, .error_number = 0};
    const auto g = grade_containment(expectation(), m, c);
    CHECK(g.grades.filesystem == enforcement::unavailable);
    CHECK(std::find(g.problems.begin(), g.problems.end(), "filesystem: the child read the host canary file") !=
          g.problems.end());
  }
}

TEST_CASE("network: socket() refused for both families is an observed denial") {
  // What the PROCESS filter makes the probe see: EACCES from socket() itself, reported as denied.
  auto c = observed();
  c.network = {.ipv4 = {probe_outcome::denied, 13}, .ipv6 = {probe_outcome::denied, 13}};
  const auto denied = grade_containment(expectation(), applied(), c);
  CHECK(denied.grades.network == enforcement::enforced);
  CHECK(denied.network_denied);
  SUBCASE("one family that connected is exposure, whatever the other said") {
    c.network.ipv6 = {probe_outcome::connected, 0};
    const auto g = grade_containment(expectation(), applied(), c);
    CHECK(g.grades.network == enforcement::unavailable);
    CHECK_FALSE(g.network_denied);
  }
}

TEST_CASE("filesystem grades from the canary") {
  SUBCASE("a readable canary is exposure") {
    auto c = observed();
    c.canary.readable = true;
    auto m = applied();
    m.landlock_abi = 3;
    const auto g = grade_containment(expectation(), m, c);
    CHECK(g.grades.filesystem == enforcement::unavailable);
    CHECK_FALSE(g.problems.empty());
  }
  SUBCASE("Landlock and an unreadable canary: unverified") {
    auto m = applied();
    m.landlock_abi = 3;
    CHECK(grade_containment(expectation(), m, observed()).grades.filesystem == enforcement::unverified);
  }
  SUBCASE("a mount namespace of its own whose root is the built one: enforced") {
    CHECK(grade_containment(isolated_expectation(), isolated_applied(), isolated_observed()).grades.filesystem ==
          enforcement::enforced);
  }
  SUBCASE("the same mount namespace as the host's: not enforced, however the launcher reports it") {
    auto c = isolated_observed();
    c.namespace_ids["mnt"] = host_ids.at("mnt");
    const auto g = grade_containment(isolated_expectation(), isolated_applied(), c);
    CHECK(g.grades.filesystem != enforcement::enforced);
    CHECK_FALSE(g.reaches(isolation_level::isolated));
  }
  SUBCASE("a root holding more than the launcher built: not enforced") {
    auto c = isolated_observed();
    c.root_entries.push_back("home");
    CHECK(grade_containment(isolated_expectation(), isolated_applied(), c).grades.filesystem !=
          enforcement::enforced);
  }
}

TEST_CASE("network grades from the child's own probes") {
  auto c = observed();
  SUBCASE("either family reaching the listener is exposure") {
    c.network.ipv6.outcome = probe_outcome::connected;
    const auto g = grade_containment(expectation(), applied(), c);
    CHECK(g.grades.network == enforcement::unavailable);
    CHECK_FALSE(g.network_denied);
  }
  SUBCASE("a refused connection proves a working stack") {
    c.network.ipv4.outcome = probe_outcome::refused;
    CHECK(grade_containment(expectation(), applied(), c).grades.network == enforcement::unavailable);
  }
  SUBCASE("an inconclusive probe with a mechanism in place: unverified") {
    c.network.ipv6.outcome = probe_outcome::skipped;
    const auto g = grade_containment(expectation(), applied(), c);
    CHECK(g.grades.network == enforcement::unverified);
    CHECK(g.network_denied);
  }
  SUBCASE("an inconclusive probe without any mechanism: unavailable") {
    c.network.ipv6.outcome = probe_outcome::timeout;
    auto m = applied();
    m.seccomp = seccomp_state::none;
    CHECK(grade_containment(expectation(), m, c).grades.network == enforcement::unavailable);
  }
}

TEST_CASE("identity and process_count") {
  SUBCASE("a child still running as root is not a lesser identity") {
    auto c = observed();
    c.uid = c.euid = 0;
    const auto g = grade_containment(expectation(), applied(), c);
    CHECK(g.grades.identity == enforcement::unavailable);
    CHECK(g.grades.process_count == enforcement::unavailable);
  }
  SUBCASE("supplementary groups left behind") {
    auto c = observed();
    c.groups = {0};
    CHECK(grade_containment(expectation(), applied(), c).grades.identity == enforcement::unavailable);
  }
  SUBCASE("the same uid, explicitly allowed: identity unavailable, process_count unverified, still PROCESS") {
    auto e = expectation();
    e.run_as_uid.reset();
    e.run_as_gid.reset();
    e.worker_uid = 1000;
    auto m = applied();
    m.uid_drop = false;
    auto c = observed();
    c.uid = c.euid = c.gid = c.egid = 1000;
    const auto g = grade_containment(e, m, c);
    CHECK(g.grades.identity == enforcement::unavailable);
    CHECK(g.grades.process_count == enforcement::unverified);
    CHECK(g.achieved == isolation_level::process);
  }
}

TEST_CASE("limits read back must match what was set and what was asked") {
  SUBCASE("the child sees a different limit") {
    auto c = observed();
    c.rlimits.address_space_bytes = {-1, -1};
    const auto g = grade_containment(expectation(), applied(), c);
    CHECK(g.grades.memory == enforcement::unavailable);
    CHECK_FALSE(g.achieved.has_value());  // limits are part of the process floor
  }
  SUBCASE("the launcher set something other than the terms") {
    auto m = applied();
    m.rlimits.file_size_bytes = 1 << 30;
    auto c = observed();
    c.rlimits.file_size_bytes = {1 << 30, 1 << 30};
    CHECK(grade_containment(expectation(), m, c).grades.file_size == enforcement::unavailable);
  }
  SUBCASE("process_count includes the uid's existing processes") {
    auto m = applied();
    m.process_count_base = 10;  // then 74 should have been set, not 67
    CHECK(grade_containment(expectation(), m, observed()).grades.process_count == enforcement::unavailable);
  }
}

TEST_CASE("environment: names of unexpected variables, never values") {
  auto c = observed();
  c.environment_keys.push_back("AWS_SECRET_ACCESS_KEY");
  const auto g = grade_containment(expectation(), applied(), c);
  CHECK(g.grades.environment == enforcement::unavailable);
  CHECK_FALSE(g.achieved.has_value());
  CHECK(std::any_of(g.problems.begin(), g.problems.end(),
                    [](const std::string& p) { return p.find("AWS_SECRET_ACCESS_KEY") != std::string::npos; }));
}

TEST_CASE("a workspace that is not the fresh one is below the floor") {
  auto c = observed();
  c.workspace_entries = 3;
  CHECK_FALSE(grade_containment(expectation(), applied(), c).achieved.has_value());
  c = observed();
  c.cwd_is_workspace = false;
  CHECK_FALSE(grade_containment(expectation(), applied(), c).achieved.has_value());
}

TEST_CASE("process tree") {
  SUBCASE("a child that is not its own session leader") {
    auto c = observed();
    c.sid = 1;
    CHECK(grade_containment(expectation(), applied(), c).grades.process_tree == enforcement::unavailable);
  }
  SUBCASE("a survivor after the execution lowers the grade") {
    auto g = grade_containment(expectation(), applied(), observed());
    grade_exit(g, 0);
    CHECK(g.grades.process_tree == enforcement::enforced);
    grade_exit(g, 2);
    CHECK(g.grades.process_tree == enforcement::unavailable);
  }
}

TEST_CASE("ISOLATED needs every boundary observed") {
  const auto e = isolated_expectation();
  const auto m = isolated_applied();
  const auto good = isolated_observed();
  const auto g = grade_containment(e, m, good);
  CHECK(g.achieved == isolation_level::isolated);
  CHECK(g.problems.empty());
  CHECK(g.grades.identity == enforcement::enforced);
  CHECK(g.grades.process_tree == enforcement::enforced);
  CHECK(g.grades.network == enforcement::enforced);
  CHECK(g.grades.memory == enforcement::enforced);  // the cgroup limit read back from inside

  const auto lowered = [&](auto change) {
    auto c = good;
    change(c);
    const auto graded = grade_containment(e, m, c);
    CHECK_FALSE(graded.problems.empty());
    return graded.achieved != isolation_level::isolated;
  };
  CHECK(lowered([](child_report& c) { c.canary.readable = true; }));
  CHECK(lowered([](child_report& c) { c.namespace_ids["pid"] = "pid:[2]"; }));
  CHECK(lowered([](child_report& c) { c.namespace_ids["net"] = ""; }));
  CHECK(lowered([](child_report& c) { c.network_routes = 2; }));
  CHECK(lowered([](child_report& c) { c.uid_map = "0 0 1"; }));
  CHECK(lowered([](child_report& c) { c.capabilities_effective = "000001ffffffffff"; }));
  CHECK(lowered([](child_report& c) { c.ppid = 0; }));
  CHECK(lowered([](child_report& c) { c.namespace_ids["ipc"] = "ipc:[5]"; }));

  SUBCASE("cpu: per-process rlimits alone are unverified; the launcher's tree-wide budget enforces it") {
    CHECK(grade_containment(e, m, good).grades.cpu == enforcement::unverified);
    auto with_budget = m;
    with_budget.cpu_tree_limit = true;
    CHECK(grade_containment(e, with_budget, good).grades.cpu == enforcement::enforced);
    auto wrong = good;
    wrong.rlimits.cpu_seconds = {99, 99};
    CHECK(grade_containment(e, with_budget, wrong).grades.cpu == enforcement::unavailable);
    auto unseen = good;  // the launcher says it budgets the tree; the child saw no accounting
    unseen.cgroup_cpu_usage_us = -1;
    const auto graded = grade_containment(e, with_budget, unseen);
    CHECK(graded.grades.cpu == enforcement::unverified);
    CHECK_FALSE(graded.problems.empty());
  }
  SUBCASE("a cgroup limit the child did not read back: memory unverified, still isolated") {
    auto c = good;
    c.cgroup_memory_limit = -1;
    const auto graded = grade_containment(e, m, c);
    CHECK(graded.grades.memory == enforcement::unverified);
    CHECK(graded.achieved == isolation_level::isolated);
  }
  SUBCASE("no cgroup: memory unverified, and the launcher's reason for it is a problem, said once") {
    auto none = m;
    none.cgroup = "none";
    none.cgroup_why_none = "cgroup v2: /sys/fs/cgroup/x.scope holds processes (pids 1)";
    auto c = good;
    c.cgroup_memory_limit = -1;
    const auto graded = grade_containment(e, none, c);
    CHECK(graded.grades.memory == enforcement::unverified);
    CHECK(std::count(graded.problems.begin(), graded.problems.end(),
                     "cgroup: none: cgroup v2: /sys/fs/cgroup/x.scope holds processes (pids 1)") == 1);
    none.cgroup_why_none.clear();
    const auto silent = grade_containment(e, none, c);
    CHECK(std::none_of(silent.problems.begin(), silent.problems.end(),
                       [](const std::string& p) { return p.starts_with("cgroup:"); }));
  }
  SUBCASE("unprivileged: the worker's own uid mapped, identity unavailable, the boundary holds") {
    auto unprivileged = e;
    unprivileged.run_as_uid.reset();
    unprivileged.run_as_gid.reset();
    unprivileged.worker_uid = 1000;
    auto c = good;
    c.uid_map = c.gid_map = "0 1000 1";
    auto applied_unprivileged = m;
    applied_unprivileged.uid_drop = false;
    const auto graded = grade_containment(unprivileged, applied_unprivileged, c);
    CHECK(graded.grades.identity == enforcement::unavailable);
    CHECK(graded.achieved == isolation_level::isolated);
    // RLIMIT_NPROC counts the worker's uid, shared with everything else it runs; the cgroup's
    // pids.max counts this tree alone.
    CHECK(graded.grades.process_count == enforcement::enforced);
    SUBCASE("process_count: pids.max not read back, or not the count plus init, or no cgroup: unverified") {
      auto unread = c;
      unread.cgroup_pids_limit = -1;
      CHECK(grade_containment(unprivileged, applied_unprivileged, unread).grades.process_count ==
            enforcement::unverified);
      auto other = c;
      other.cgroup_pids_limit = 64;  // the count without the sandbox's init: not what the launcher sets
      CHECK(grade_containment(unprivileged, applied_unprivileged, other).grades.process_count ==
            enforcement::unverified);
      auto no_cgroup = applied_unprivileged;
      no_cgroup.cgroup = "none";
      CHECK(grade_containment(unprivileged, no_cgroup, c).grades.process_count == enforcement::unverified);
    }
  }
  SUBCASE("process_count: the cgroup's pids.max holds the tree even where the identity drop failed") {
    auto c = good;
    c.uid_map = "0 0 1";  // not the requested uid: identity unavailable
    const auto graded = grade_containment(e, m, c);
    CHECK(graded.grades.identity == enforcement::unavailable);
    CHECK(graded.grades.process_count == enforcement::enforced);
    c.cgroup_pids_limit = -1;
    CHECK(grade_containment(e, m, c).grades.process_count == enforcement::unavailable);
  }
  SUBCASE("process_count: an rlimit read back wrong is unavailable, whatever the cgroup says") {
    auto c = good;
    c.rlimits.process_count = {99, 99};
    CHECK(grade_containment(e, m, c).grades.process_count == enforcement::unavailable);
  }
}

TEST_CASE("a rootful container: no user namespace, a dedicated lesser uid with no capability in its place") {
  // The container runtime makes mount, pid, net, ipc, uts and cgroup namespaces; the child runs as
  // the execution's own uid of the host (--user), with every capability dropped.
  const auto e = isolated_expectation();
  auto m = isolated_applied();
  m.namespaces = {"mount", "pid", "net", "ipc", "uts", "cgroup"};
  m.cgroup = "container";
  auto c = isolated_observed();
  c.namespace_ids["user"] = host_ids.at("user");  // the host's own user namespace
  c.uid = c.euid = c.gid = c.egid = run_as;
  c.groups = {run_as};
  c.uid_map = c.gid_map = "0 0 4294967295";
  const auto g = grade_containment(e, m, c);
  CHECK(g.grades.identity == enforcement::enforced);
  CHECK_MESSAGE(g.achieved == isolation_level::isolated, g.problems.size());

  const auto reached = [&](auto change) {
    auto changed = c;
    change(changed);
    return grade_containment(e, m, changed).achieved;
  };
  // Any capability left, in either set, is a privilege over the host's objects: no boundary.
  CHECK(reached([](child_report& r) { r.capabilities_effective = "0000000000000400"; }) == isolation_level::process);
  CHECK(reached([](child_report& r) { r.capabilities_bounding = "0000000000000400"; }) == isolation_level::process);
  // Root of the host, or the worker's own uid, is no lesser identity.
  CHECK(reached([](child_report& r) { r.uid = r.euid = 0; }) != isolation_level::isolated);
  // Without a dedicated uid to expect (an unprivileged worker), only a user namespace will do.
  auto no_uid = e;
  no_uid.run_as_uid.reset();
  no_uid.run_as_gid.reset();
  CHECK(grade_containment(no_uid, m, c).achieved == isolation_level::process);
}

TEST_CASE("what a level promises: every grading that reaches it meets the promise, until something lowers a grade") {
  const auto shortfalls_at = [](isolation_level level, const grading_expectation& e, const mechanism_report& m,
                                const child_report& c) {
    const auto g = grade_containment(e, m, c);
    REQUIRE(g.reaches(level));
    return below_promise(g.grades, promised_grades(level, e.network));
  };
  SUBCASE("PROCESS, as well contained as it gets, and with its weaker ways of being reached") {
    CHECK(shortfalls_at(isolation_level::process, expectation(), applied(), observed()).empty());
    auto no_landlock = applied();  // filesystem unavailable: PROCESS promises no filesystem boundary
    no_landlock.landlock_abi = 0;
    CHECK(shortfalls_at(isolation_level::process, expectation(), no_landlock, observed()).empty());
    auto same_uid = expectation();  // identity unavailable, process_count unverified: allowed
    same_uid.run_as_uid.reset();
    same_uid.run_as_gid.reset();
    same_uid.worker_uid = 1000;
    auto kept = applied();
    kept.uid_drop = false;
    auto c = observed();
    c.uid = c.euid = c.gid = c.egid = 1000;
    CHECK(shortfalls_at(isolation_level::process, same_uid, kept, c).empty());
  }
  SUBCASE("ISOLATED, and an unprivileged worker's honest identity") {
    CHECK(shortfalls_at(isolation_level::isolated, isolated_expectation(), isolated_applied(), isolated_observed())
              .empty());
    auto unprivileged = isolated_expectation();
    unprivileged.run_as_uid.reset();
    unprivileged.run_as_gid.reset();
    unprivileged.worker_uid = 1000;
    auto m = isolated_applied();
    m.uid_drop = false;
    auto c = isolated_observed();
    c.uid_map = c.gid_map = "0 1000 1";
    CHECK(shortfalls_at(isolation_level::isolated, unprivileged, m, c).empty());
    // Reaching ISOLATED more than meets what PROCESS promises.
    CHECK(shortfalls_at(isolation_level::process, unprivileged, m, c).empty());
  }
  SUBCASE("PROCESS reached over a working network stack, when no network was asked: below the promise") {
    auto c = observed();
    c.network.ipv6 = {probe_outcome::connected, 0};
    CHECK(shortfalls_at(isolation_level::process, expectation(), applied(), c) ==
          std::vector<grade_shortfall>{{"network", enforcement::unavailable, enforcement::unverified}});
    auto granted = expectation();  // asked for network: nothing is promised about it
    granted.network = network_access::unrestricted;
    CHECK(shortfalls_at(isolation_level::process, granted, applied(), c).empty());
  }
  SUBCASE("a survivor after the program ran lowers process_tree below either promise") {
    for (const auto level : {isolation_level::process, isolation_level::isolated}) {
      auto g = grade_containment(isolated_expectation(), isolated_applied(), isolated_observed());
      grade_exit(g, 1);
      CHECK(below_promise(g.grades, promised_grades(level, network_access::none)) ==
            std::vector<grade_shortfall>{{"process_tree", enforcement::unavailable,
                                          level == isolation_level::isolated ? enforcement::enforced
                                                                             : enforcement::unverified}});
    }
  }
  SUBCASE("the walk names each guarantee as the result's JSON does, in order") {
    guarantee_grades none{};  // every grade unavailable
    const auto all = below_promise(none, promised_grades(isolation_level::isolated, network_access::none));
    std::vector<std::string_view> names;
    for (const auto& s : all) names.push_back(s.guarantee);
    CHECK(names == std::vector<std::string_view>{"filesystem", "network", "process_tree", "cpu", "memory",
                                                 "file_size", "wall_clock", "environment"});
  }
}

namespace {

/// What the macOS launcher reports (launchers/macos/main.cpp): a seatbelt profile, no subreaper,
/// no seccomp, no address-space limit; a uid sweep when the uid is the execution's alone.
mechanism_report macos_applied(bool exclusive_uid) {
  mechanism_report m;
  m.session = m.uid_drop = m.fds_closed = m.environment_built = true;
  m.seatbelt = true;
  m.uid_sweep = exclusive_uid;
  m.address_space_limit = false;
  m.rlimits = {.cpu_seconds = 10, .address_space_bytes = -1, .file_size_bytes = 10 << 20,
               .process_count = 67, .open_files = 256, .core_bytes = 0};
  m.process_count_base = 3;
  return m;
}

child_report macos_observed() {
  auto c = observed();
  c.no_new_privs = false;
  c.seccomp_mode = -1;
  c.rlimits.address_space_bytes = {-1, -1};
  c.canary = {.readable = false, .error_number = 1};  // EPERM: the profile denied it
  return c;
}

/// What the Windows launcher reports when its Job Object reads every limit back (real Windows),
/// and what its child reads from inside that job.
job_readback windows_job() {
  return {.in_job = true, .kill_on_close = true, .breakaway_forbidden = true, .ui_restricted = true,
          .active_processes_limit = 64, .memory_bytes = 512 << 20, .cpu_seconds = 10};
}

grading_expectation windows_expectation() {
  auto e = expectation();
  e.run_as_uid.reset();
  e.run_as_gid.reset();
  e.limits.process_count.value = 64;
  return e;
}

mechanism_report windows_applied() {
  mechanism_report m;
  m.fds_closed = m.environment_built = true;
  m.rlimits = {.cpu_seconds = 10, .address_space_bytes = 512 << 20, .process_count = 64};
  m.job = windows_job();
  return m;
}

child_report windows_observed() {
  auto c = observed();
  c.uid = c.euid = c.gid = c.egid = -1;
  c.pgid = c.sid = 0;
  c.seccomp_mode = -1;
  c.rlimits = {.cpu_seconds = {10, 10}, .address_space_bytes = {512 << 20, 512 << 20}, .process_count = {64, 64}};
  c.network = {.ipv4 = {probe_outcome::skipped, 0}, .ipv6 = {probe_outcome::skipped, 0}};
  c.job = windows_job();
  return c;
}

}  // namespace

TEST_CASE("the macOS launcher's report grades as the spec's honest limits say") {
  SUBCASE("PROCESS, with filesystem unverified and memory unavailable") {
    const auto g = grade_containment(expectation(), macos_applied(true), macos_observed());
    CHECK(g.achieved == isolation_level::process);
    CHECK(g.grades.filesystem == enforcement::unverified);
    CHECK(g.grades.memory == enforcement::unavailable);
    CHECK(g.grades.network == enforcement::enforced);  // from the child's v4 and v6 probe
    CHECK(g.grades.process_tree == enforcement::enforced);
    CHECK(g.grades.process_count == g.grades.identity);
  }
  SUBCASE("a readable canary is exposure, seatbelt or not") {
    auto c = macos_observed();
    c.canary.readable = true;
    CHECK(grade_containment(expectation(), macos_applied(true), c).grades.filesystem == enforcement::unavailable);
  }
  SUBCASE("a probe that connected is exposure") {
    auto c = macos_observed();
    c.network.ipv6 = {probe_outcome::connected, 0};
    CHECK(grade_containment(expectation(), macos_applied(true), c).grades.network == enforcement::unavailable);
  }
  SUBCASE("without a uid of its own the sweep finds the session only: the tree is unverified") {
    const auto g = grade_containment(expectation(), macos_applied(false), macos_observed());
    CHECK(g.grades.process_tree == enforcement::unverified);
    CHECK(g.achieved == isolation_level::process);
  }
  SUBCASE("identity unverified (the worker's own uid) makes process_count unverified too") {
    auto e = expectation();
    e.run_as_uid.reset();
    e.run_as_gid.reset();
    auto m = macos_applied(false);
    m.uid_drop = false;
    const auto g = grade_containment(e, m, macos_observed());
    CHECK(g.grades.identity == enforcement::unavailable);
    CHECK(g.grades.process_count == enforcement::unverified);
  }
  SUBCASE("never ISOLATED") {
    auto e = expectation();
    e.requested = isolation_level::isolated;
    CHECK(grade_containment(e, macos_applied(true), macos_observed()).achieved == isolation_level::process);
  }
}

TEST_CASE("a Windows Job Object: tree-wide limits graded from what the job read back") {
  const auto e = windows_expectation();
  SUBCASE("read back in full, by the launcher and from inside: PROCESS, the job's limits enforced") {
    const auto g = grade_containment(e, windows_applied(), windows_observed());
    CHECK(g.achieved == isolation_level::process);
    CHECK(g.grades.process_tree == enforcement::enforced);
    CHECK(g.grades.cpu == enforcement::enforced);
    CHECK(g.grades.memory == enforcement::enforced);
    CHECK(g.grades.process_count == enforcement::enforced);
    CHECK(g.grades.identity == enforcement::unavailable);  // the worker's own account
    CHECK(g.grades.filesystem == enforcement::unavailable);
    CHECK(g.grades.file_size == enforcement::unavailable);  // Windows has no file-size cap
  }
  SUBCASE("every limit reads back as unset (Wine): nothing is enforced, and the floor is not reached") {
    auto m = windows_applied();
    auto c = windows_observed();
    m.job = c.job = job_readback{.in_job = true};
    m.rlimits = {};
    c.rlimits = {};
    const auto g = grade_containment(e, m, c);
    CHECK_FALSE(g.achieved);
    CHECK(g.grades.process_tree == enforcement::unverified);
    CHECK(g.grades.cpu == enforcement::unavailable);
    CHECK(g.grades.memory == enforcement::unavailable);
    CHECK(g.grades.process_count == enforcement::unavailable);
  }
  SUBCASE("the child does not see the job's limit the launcher read back: per process only") {
    auto c = windows_observed();
    c.job.memory_bytes = -1;
    const auto g = grade_containment(e, windows_applied(), c);
    CHECK(g.grades.memory == enforcement::unverified);
    CHECK(g.grades.cpu == enforcement::enforced);
  }
  SUBCASE("a child outside the job: no process tree") {
    auto c = windows_observed();
    c.job = {};
    const auto g = grade_containment(e, windows_applied(), c);
    CHECK(g.grades.process_tree == enforcement::unavailable);
    CHECK_FALSE(g.achieved);
  }
}
