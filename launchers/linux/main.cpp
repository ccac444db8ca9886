// psych-launch-linux: runs one program's interpreter at isolation=process or isolation=isolated.
//
// The host hands it fds 0-4 (docs/contract.md, "Channels") and one `launch`
// frame on control. It answers `started` once the interpreter is exec'd (or
// `error`, and nothing ran), supervises the child until it ends, kills and
// reaps whatever the program left behind, and answers `exit`.
//
// In a container it is started as `psych-launch-linux --connect SOCKET` and receives those
// descriptors over the worker's socket first (container_entry.hpp).
//
// Exit status: 0 after `exit` was written; 2 for a request it refused (bad
// frame, bad values, an identity it will not run as); 1 when setup failed or
// the host went away.
#include <csignal>
#include <variant>

#include <unistd.h>

#include "bootstrap_fd.hpp"
#include "cgroup.hpp"
#include "channel.hpp"
#include "container_entry.hpp"
#include "environment.hpp"
#include "setup_error.hpp"
#include "egress_listener.hpp"
#include "fds.hpp"
#include "identity.hpp"
#include "isolated.hpp"
#include "landlock.hpp"
#include "launch_steps.hpp"
#include "mount_root.hpp"
#include "namespaces.hpp"
#include "process_confinement.hpp"
#include "psych_bootstrap.hpp"
#include "request.hpp"
#include "rlimits.hpp"
#include "seccomp.hpp"
#include "signals.hpp"
#include "spawn.hpp"
#include "supervise.hpp"
#include "task_count.hpp"
#include "tree.hpp"
#include "validate.hpp"

namespace psych::launcher {
namespace {

/// Started as a container's entry (`--connect`): the root is the image's (process_confinement.hpp).
bool inside_container = false;
/// Inside a container, whether its cgroup's CPU accounting can be read, to budget the tree by.
bool container_accounting = false;

/// ISOLATED: who the sandbox's root is on the host (namespaces.hpp).
setup_result<namespace_identity> plan_namespace_identity(const identity_plan& identity) {
  if (::geteuid() == 0) {
    if (!identity.drop || identity.uid == 0 || identity.gid == 0)
      return fail(refusal(launch_stage::identity, "as root, isolation=isolated maps the sandbox's root to a dedicated "
                                      "unprivileged run_as uid/gid, and none was given"));
    return namespace_identity{.host_uid = identity.uid, .host_gid = identity.gid, .privileged_writer = true};
  }
  if (identity.drop && identity.uid != ::getuid())
    return fail(refusal(launch_stage::identity, "an unprivileged launcher can map only its own uid into the sandbox; "
                                    "run_as must be null or the worker's uid"));
  return namespace_identity{.host_uid = ::getuid(), .host_gid = ::getgid(), .privileged_writer = false};
}

/// The launch as the interpreter sees it from inside the new root: its workspace, HOME and TMPDIR
/// are the sandbox's paths, not the host's.
protocol::launch_frame as_seen_inside(const protocol::launch_frame& launch) {
  auto inside = launch;
  inside.workspace = sandbox_workspace;
  if (inside.environment.contains("HOME")) inside.environment["HOME"] = sandbox_workspace;
  if (inside.environment.contains("TMPDIR")) inside.environment["TMPDIR"] = sandbox_tmp;
  return inside;
}

/// The cgroup directories the child reads its limits back from, and where they appear inside.
std::vector<bind_target> cgroup_binds(const execution_cgroup& cgroup) {
  std::vector<bind_target> binds;
  for (const auto& dir : cgroup.directories()) {
    if (cgroup.version() == cgroup_version::v2) {
      binds.push_back({dir, "/sys/fs/cgroup"});
      continue;
    }
    // v1: /sys/fs/cgroup/<controller>/<path> appears as /sys/fs/cgroup/<controller>.
    constexpr std::string_view base = "/sys/fs/cgroup/";
    if (!dir.starts_with(base)) continue;
    const auto controller = dir.substr(base.size(), dir.find('/', base.size()) - base.size());
    binds.push_back({dir, std::string(base) + controller});
  }
  return binds;
}

/// The tree's CPU time from the cgroup's accounting, where there is one: the execution's own, or
/// inside a container the container's.
std::function<std::optional<double>()> tree_cpu_of(const std::optional<execution_cgroup>& cgroup) {
  if (container_accounting) return [] { return container_cpu_seconds(); };
  if (!cgroup || !cgroup->has_cpu_accounting()) return {};
  return [&cgroup] { return cgroup->cpu_seconds(); };
}

/// ISOLATED: init's report of the interpreter's end, read from its pipe; none at PROCESS.
std::function<std::optional<init_report>()> init_reported_on(int init_report_fd) {
  if (init_report_fd < 0) return {};
  return [init_report_fd] { return read_init_report(init_report_fd); };
}

/// The sandbox's init counts against the pid limits too.
constexpr std::int64_t init_processes = 1;

/// What an ISOLATED execution's cgroup holds the whole tree to.
cgroup_limits tree_limits_of(const sandbox_limits& limits) {
  return {.memory_bytes = static_cast<std::int64_t>(limits.address_space_bytes.value),
          .pids = static_cast<std::int64_t>(limits.process_count.value) + init_processes};
}

/// A prepared launch's narrowing (supervise.hpp): the cgroup first, then the rlimits the child
/// lowers its own to, planned as the launch planned them.
narrower narrowing_of(const protocol::launch_frame& launch, const std::optional<execution_cgroup>& cgroup,
                      std::int64_t process_count_base) {
  if (!launch.prepared) return {};
  return [&launch, &cgroup, process_count_base](const sandbox_limits& limits) -> setup_result<applied_rlimits> {
    PSYCH_TRY(validate_narrowing(limits, launch.limits));
    if (cgroup) {
      PSYCH_TRY(cgroup->narrow(tree_limits_of(limits)));
    }
    return report_rlimits(plan_rlimits(limits, launch.open_files, process_count_base));
  };
}

/// network=allowlist: the port of psych's egress proxy inside the sandbox (validate.cpp checked it).
std::uint16_t egress_port_of(const protocol::launch_frame& launch) {
  return launch.network == network_access::allowlist ? static_cast<std::uint16_t>(launch.egress_proxy_port) : 0;
}

/// ISOLATED: the namespaces, the minimal root, the cgroup, Landlock and seccomp (isolated.hpp).
setup_result<launched> start_isolated(accepted_request& request, std::optional<execution_cgroup>& cgroup,
                                      int& init_report_fd, int& keepalive_fd) {
  const auto& launch = request.launch;
  PSYCH_TRY(auto identity, plan_namespace_identity(request.identity));
  PSYCH_TRY(hand_over(launch.workspace, request.identity));
  PSYCH_TRY(hand_over(launch.tmp_dir, request.identity));
  PSYCH_TRY(auto made, execution_cgroup::create(tree_limits_of(launch.limits)));
  cgroup.emplace(std::move(made));
  PSYCH_TRY(auto bootstrap, seal_bootstrap(bootstrap_blob));
  const auto inside = as_seen_inside(launch);
  PSYCH_TRY(auto environment, build_environment(inside.environment));

  root_plan root{.mount_point = launch.tmp_dir,
                 .interpreter = launch.interpreter,
                 .workspace = launch.workspace,
                 .cgroup_dirs = cgroup_binds(*cgroup)};
  landlock_paths landlock{.read_execute = read_only_binds(root),
                          .read_write = {sandbox_workspace, sandbox_tmp},
                          .devices = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"},
                          .read_only = {"/proc", "/dev", "/sys"},
                          // The child lists "/" to show the host what its root holds (grading).
                          .list_only = {"/"},
                          .network = launch.network,
                          .egress_port = egress_port_of(launch)};
  const isolated_plan plan{
      .child = child_plan{.basics = {.interpreter = launch.interpreter,
                                     .argv = bootstrap_argv(inside, bootstrap_loader),
                                     .environment = std::move(environment),
                                     .workspace = sandbox_workspace,
                                     .rlimits = plan_rlimits(launch.limits, launch.open_files, init_processes),
                                     .identity = request.identity,
                                     .bootstrap_fd = bootstrap.get()},
                          .filter = filter_for(launch.network)},
                           .root = root,
                           .identity = identity,
                           .landlock = std::move(landlock),
                           .egress_port = egress_port_of(launch),
                           .egress_handover = protocol::egress_handover_fd};
  const execution_cgroup& group = *cgroup;
  PSYCH_TRY(auto child, spawn_isolated(plan, [&group](pid_t init) { return group.attach(init); }));
  init_report_fd = child.report_fd;
  keepalive_fd = child.keepalive_fd;
  return launched{child.init, protocol::started_frame{
      .pid = child.init.pid,
      .mechanisms = mechanism_report{.session = true,
                                     .subreaper = true,
                                     .no_new_privs = true,
                                     .seccomp = seccomp_state::filter,
                                     .landlock_abi = landlock_abi_used(),
                                     .namespaces = isolated_namespace_names(),
                                     .cgroup = std::string(name_of_version(cgroup->version())),
                                     .cgroup_why_none = cgroup->why_none(),
                                     .uid_drop = identity.privileged_writer,
                                     .fds_closed = true,
                                     .environment_built = true,
                                     .rlimits = report_rlimits(plan.child.basics.rlimits),
                                     .process_count_base = init_processes,
                                     .root_entries = root_entries(root),
                                     .cpu_tree_limit = cgroup->has_cpu_accounting(),
                                     .egress_listeners = child.egress_listeners}}};
}

/// From an accepted request to a running interpreter: everything the launcher itself sets up,
/// then the fork.
setup_result<launched> start(accepted_request& request) {
  const auto& launch = request.launch;
  PSYCH_TRY(become_subreaper());
  PSYCH_TRY(auto base, count_tasks_of(request.identity.uid));
  PSYCH_TRY(hand_over(launch.workspace, request.identity));
  PSYCH_TRY(hand_over(launch.tmp_dir, request.identity));
  PSYCH_TRY(auto bootstrap, seal_bootstrap(bootstrap_blob));
  PSYCH_TRY(const auto landlock, landlock_ruleset::prepare(process_landlock_paths(launch, inside_container)));
  // network=allowlist in a container (validate.cpp allows it nowhere else at this level): the
  // proxy's listeners in the container's own network namespace, handed to the host.
  int egress_listeners = 0;
  if (const auto port = egress_port_of(launch)) {
    PSYCH_TRY(egress_listeners, open_egress_listeners(port, protocol::egress_handover_fd));
  }
  const child_plan plan{.basics = {.interpreter = launch.interpreter,
                                   .argv = bootstrap_argv(launch, bootstrap_loader),
                                   .environment = std::move(request.environment),
                                   .workspace = launch.workspace,
                                   .rlimits = plan_rlimits(launch.limits, launch.open_files, base),
                                   .identity = request.identity,
                                   .bootstrap_fd = bootstrap.get()},
                        .filter = filter_for(launch.network),
                        .landlock = &landlock};
  PSYCH_TRY(auto child, spawn(plan));

  // Every field is what the child got: spawn() returns only after each step succeeded.
  return launched{child, protocol::started_frame{
      .pid = child.pid,
      .mechanisms = mechanism_report{.session = true,
                                     .subreaper = true,
                                     .no_new_privs = true,
                                     .seccomp = seccomp_state::filter,
                                     .landlock_abi = landlock.abi(),
                                     .namespaces = {},
                                     .cgroup = "none",
                                     .uid_drop = request.identity.drop,
                                     .fds_closed = true,
                                     .environment_built = true,
                                     .rlimits = report_rlimits(plan.basics.rlimits),
                                     .process_count_base = base,
                                     .cpu_tree_limit = container_accounting,
                                     .egress_listeners = egress_listeners}}};
}

int run() {
  control_channel control{control_fd};
  int status = exit_setup_failed;
  // In a container the program's network namespace is the container's (--network=none).
  auto accepted = accept_launch(control, isolation_level::isolated, open_signal_source, status, inside_container);
  if (!accepted) return status;
  auto& request = accepted.value().request;
  const auto& signals = accepted.value().signals;
  std::optional<execution_cgroup> cgroup;  // removed when run() returns, after the tree is gone
  int init_report_fd = -1, keepalive_fd = -1;
  auto started = request.launch.isolation == isolation_level::isolated
                     ? start_isolated(request, cgroup, init_report_fd, keepalive_fd)
                     : start(request);
  // The run_as uid, where this execution holds it alone and the launcher can take it: the sweep's
  // last resort against a tree that forks faster than /proc can be scanned (owner_kill.hpp).
  const auto& run_as = request.launch.run_as;
  const bool sole_owner = request.identity.drop && run_as && run_as->exclusive && ::geteuid() == 0;
  proc_descendants tree(sole_owner ? std::optional(request.identity) : std::nullopt);
  if (!started) return report_failed_start(control, started.error(), signals, tree);
  if (!report_started(control, started.value(), signals, tree)) return exit_setup_failed;
  const spawned child = started.value().child;
  auto outcome = supervise(control, watch{.interpreter = child.pid,
                                          .started = child.at,
                                          .wall_seconds = request.launch.limits.wall_seconds.value,
                                          .cpu_seconds = request.launch.limits.cpu_seconds.value,
                                          .signals = signals,
                                          .tree = &tree,
                                          .init_reported = init_reported_on(init_report_fd),
                                          .tree_cpu_seconds = tree_cpu_of(cgroup),
                                          .narrow = narrowing_of(request.launch, cgroup,
                                                                 started.value().started.mechanisms.process_count_base)});
  const bool memory_hit = cgroup ? cgroup->memory_limit_hit() : inside_container && container_memory_limit_hit();
  if (memory_hit && outcome.exit.signal == SIGKILL && !outcome.exit.limit_hit)
    outcome.exit.limit_hit = limit_name::memory_bytes;  // the cgroup's OOM kill, not a signal the program chose
  if (keepalive_fd >= 0) ::close(keepalive_fd);
  if (init_report_fd >= 0) ::close(init_report_fd);
  return report_exit(control, outcome);
}

}  // namespace
}  // namespace psych::launcher

int main(int argc, char** argv) {
  using namespace psych::launcher;
  if (argc == 3 && argv[1] == connect_argument) {
    // In a container: the descriptors arrive over the worker's socket (container_entry.hpp). Until
    // they have, stderr (the container runtime's, which the worker reads) is the only way to say why.
    if (auto received = receive_descriptors(argv[2]); !received) {
      const auto line = "psych-launch-linux: " + received.error().message + "\n";
      (void)!::write(2, line.data(), line.size());
      return 1;
    }
    inside_container = true;
    container_accounting = container_cpu_seconds().has_value();
  } else if (argc != 1) {
    constexpr std::string_view usage = "usage: psych-launch-linux [--connect SOCKET]\n";
    (void)!::write(2, usage.data(), usage.size());
    return 2;
  }
  return run();
}
