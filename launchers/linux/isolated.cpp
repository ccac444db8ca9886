#include "isolated.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "capabilities.hpp"
#include "egress_listener.hpp"
#include "exec_status.hpp"
#include "fds.hpp"
#include "platform/posix/retry.hpp"
#include "proc.hpp"
#include "rlimits.hpp"
#include "seccomp.hpp"
#include "signals.hpp"

namespace psych::launcher {

namespace {

/// The pipes between the launcher and init. Each end is closed by the side that does not use it.
struct init_pipes {
  int status[2] = {-1, -1};     ///< setup failures of init and the interpreter (exec_status.hpp)
  int go[2] = {-1, -1};         ///< launcher -> init: the maps and the cgroup are in place; later, its hangup
  int report[2] = {-1, -1};     ///< init -> launcher: init_report
  int egress[2] = {-1, -1};     ///< init -> launcher: the egress proxy's listeners (a Unix socket pair)

  void close_all() {
    for (int* pair : {status, go, report, egress})
      for (int i = 0; i < 2; ++i)
        if (pair[i] >= 0) ::close(std::exchange(pair[i], -1));
  }
};

setup_result<void> open_pipes(init_pipes& pipes, bool egress) {
  for (int* pair : {pipes.status, pipes.go, pipes.report})
    if (::pipe2(pair, O_CLOEXEC) != 0) {
      pipes.close_all();
      return fail(system_failure(launch_stage::exec, "pipe2", errno, "O_CLOEXEC"));
    }
  // Descriptors travel only over a Unix socket (SCM_RIGHTS).
  if (egress && ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pipes.egress) != 0) {
    pipes.close_all();
    return fail(system_failure(launch_stage::egress, "socketpair", errno, "AF_UNIX, SOCK_STREAM"));
  }
  return success();
}

/// In the interpreter's process, forked by init inside the new root. Each step is fatal.
setup_result<void> set_up_interpreter(const isolated_plan& plan, const landlock_ruleset& ruleset) {
  const child_plan& child = plan.child;
  // As at the PROCESS level, but no identity drop: the user namespace maps this root to run_as.
  PSYCH_TRY(enter_child_session(child.basics));
  if (::chdir(sandbox_workspace) != 0) return fail(system_failure(launch_stage::workspace, "chdir", errno, sandbox_workspace));
  PSYCH_TRY(drop_all_capabilities());
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return fail(system_failure(launch_stage::no_new_privs, "prctl", errno, "PR_SET_NO_NEW_PRIVS, 1"));
  PSYCH_TRY(ruleset.restrict_self());  // needs NoNewPrivs; before seccomp, which would deny it nothing but is last
  PSYCH_TRY(install_filter(child.filter));
  return fail(exec_interpreter(child.basics));
}

/// Init keeps only what it still needs: the report pipe and the launcher's keepalive.
void close_all_but(int keep_a, int keep_b) {
  const int low = std::min(keep_a, keep_b), high = std::max(keep_a, keep_b);
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int fd = 0; fd <= 2; ++fd)
    if (null >= 0) ::dup2(null, fd);  // the program's pipes must reach EOF when the program's tree is gone
  if (null > 2) ::close(null);
  ::close_range(3, static_cast<unsigned>(low - 1), 0);
  if (high > low + 1) ::close_range(static_cast<unsigned>(low + 1), static_cast<unsigned>(high - 1), 0);
  ::close_range(static_cast<unsigned>(high + 1), ~0U, 0);
}

std::int64_t processes_besides_init() {
  std::int64_t count = 0;
  if (DIR* proc = ::opendir("/proc")) {
    while (const dirent* entry = ::readdir(proc))
      if (entry->d_name[0] >= '1' && entry->d_name[0] <= '9' && std::strcmp(entry->d_name, "1") != 0) ++count;
    ::closedir(proc);
  }
  return count;
}

/// Init after the interpreter's fork: reaps every process of the namespace (orphans come to it)
/// until the interpreter itself has ended, reports, and exits, which kills the rest.
[[noreturn]] void reap_until_interpreter_ends(pid_t interpreter, int report_fd) {
  init_report report;
  for (;;) {
    int status = 0;
    rusage usage{};
    const pid_t pid = posix::retry_on_eintr([&] { return ::wait4(-1, &status, 0, &usage); });
    if (pid < 0) break;  // no children at all: nothing left to wait for
    if (pid == interpreter) {
      report.status = status;
      report.usage = usage;
      break;
    }
  }
  report.leftovers = processes_besides_init();
  [[maybe_unused]] const auto written = ::write(report_fd, &report, sizeof report);
  ::_exit(0);
}

setup_result<void> wait_for_go(int go_fd) {
  char go = 0;
  const ssize_t n = posix::retry_on_eintr([&] { return ::read(go_fd, &go, 1); });
  if (n != 1) return fail(refusal(launch_stage::namespaces, "the launcher ended before the sandbox was set up"));
  return success();
}

/// The launcher may have died between the go-ahead and PR_SET_PDEATHSIG: it holds the go pipe's
/// write end for the whole execution, so a hangup there means nobody would ever kill this init.
setup_result<void> check_launcher_alive(int go_fd) {
  pollfd watched{go_fd, POLLIN, 0};
  if (::poll(&watched, 1, 0) > 0 && (watched.revents & (POLLHUP | POLLERR)))
    return fail(refusal(launch_stage::session, "the launcher ended during setup"));
  return success();
}

[[noreturn]] void run_init(const isolated_plan& plan, init_pipes pipes) {
  const int status_fd = pipes.status[1];
  const auto setup = [&]() -> setup_result<pid_t> {
    PSYCH_TRY(wait_for_go(pipes.go[0]));
    PSYCH_TRY(become_namespace_root(plan.identity));
    // After the uid change, which clears the parent-death signal.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
      return fail(system_failure(launch_stage::session, "prctl", errno, "PR_SET_PDEATHSIG, SIGKILL"));
    PSYCH_TRY(check_launcher_alive(pipes.go[0]));
    if (::sethostname("psych", 5) != 0) return fail(system_failure(launch_stage::namespaces, "sethostname", errno, "psych"));
    if (plan.egress_port != 0) {
      PSYCH_TRY(open_egress_listeners(plan.egress_port, pipes.egress[1]));
      ::close(std::exchange(pipes.egress[1], -1));
    }
    PSYCH_TRY(enter_minimal_root(plan.root));
    PSYCH_TRY(auto ruleset, landlock_ruleset::prepare(plan.landlock));
    const pid_t interpreter = ::fork();
    if (interpreter < 0) return fail(system_failure(launch_stage::exec, "fork", errno));
    if (interpreter == 0) report_setup_failure(status_fd, set_up_interpreter(plan, ruleset).error());
    return interpreter;
  };
  ::close(pipes.status[0]);
  ::close(pipes.go[1]);
  ::close(pipes.report[0]);
  if (pipes.egress[0] >= 0) ::close(pipes.egress[0]);
  auto interpreter = setup();
  if (!interpreter) report_setup_failure(status_fd, interpreter.error());
  close_all_but(pipes.report[1], pipes.go[0]);
  reap_until_interpreter_ends(interpreter.value(), pipes.report[1]);
}

/// The interpreter's pid on the host: init's only child while init waits for it. From the
/// kernel's list of init's children, or, on a kernel built without it, from every process's parent.
/// None when init has no child left: the interpreter exec'd (its set-up was reported) and has
/// already ended (a memory limit below what it needs to start kills it at once) and been reaped;
/// init's report then says how it ended, which is the run's answer, not a failed launch. Nothing
/// else can be init's child yet: the host sends no program before `started`.
setup_result<std::optional<pid_t>> only_child_of(pid_t init) {
  char buffer[64];
  if (const auto children = read_proc_file(init, fmt::format("task/{}/children", init).c_str(), buffer, sizeof buffer)) {
    pid_t child = 0;
    if (std::sscanf(std::string(*children).c_str(), "%d", &child) == 1 && child > 0) return child;
    return std::optional<pid_t>{};
  }
  PSYCH_TRY(const auto processes, list_processes());
  for (const pid_t pid : processes)
    if (const auto stat = read_stat(pid); stat && stat->ppid == init) return pid;
  return std::optional<pid_t>{};
}

/// False once the process has ended (a zombie, or reaped): joining a cgroup may then fail, and
/// init's report says how it ended.
bool still_running(pid_t pid) {
  const auto stat = read_stat(pid);
  return stat && stat->state != 'Z' && stat->state != 'X';
}

void end_init(pid_t pid) {
  ::kill(pid, SIGKILL);
  int ignored = 0;
  (void)posix::retry_on_eintr([&] { return ::waitpid(pid, &ignored, 0); });
}

}  // namespace

setup_result<isolated_child> spawn_isolated(const isolated_plan& plan,
                                            const std::function<setup_result<void>(pid_t)>& attach) {
  init_pipes pipes;
  PSYCH_TRY(open_pipes(pipes, plan.egress_port != 0));
  const auto at = std::chrono::steady_clock::now();
  auto cloned = clone_into_namespaces();
  if (!cloned) {
    pipes.close_all();
    return fail(cloned.error());
  }
  const pid_t init = cloned.value();
  if (init == 0) run_init(plan, pipes);

  ::close(std::exchange(pipes.status[1], -1));
  ::close(std::exchange(pipes.go[0], -1));
  ::close(std::exchange(pipes.report[1], -1));
  if (pipes.egress[1] >= 0) ::close(std::exchange(pipes.egress[1], -1));
  const auto fail_with = [&](setup_error error) -> setup_result<isolated_child> {
    end_init(init);
    pipes.close_all();
    return fail(std::move(error));
  };
  if (auto mapped = write_id_maps(init, plan.identity); !mapped) return fail_with(mapped.error());
  if (::write(pipes.go[1], "g", 1) != 1) return fail_with(system_failure(launch_stage::namespaces, "write", errno, "go pipe"));
  // Moving a process between cgroups waits for an RCU grace period when none was under way
  // (~10 ms on cgroup v1). Init and the interpreter's start-up are the sandbox's own trusted code,
  // so that wait runs beside them instead of before them; both are members before `started`,
  // and the host sends no program before `started`.
  if (auto attached = attach(init); !attached) return fail_with(attached.error());
  auto detached = detach_launcher_fds();
  if (!detached) return fail_with(detached.error());
  auto report = read_setup_status(pipes.status[0]);
  if (!report) return fail_with(report.error());
  if (report.value()) return fail_with(*report.value());
  ::close(std::exchange(pipes.status[0], -1));
  // Init sent its listeners before it forked the interpreter, so they are queued by now.
  int egress_listeners = 0;
  if (plan.egress_port != 0) {
    auto forwarded = forward_egress_listeners(pipes.egress[0], plan.egress_handover);
    if (!forwarded) return fail_with(forwarded.error());
    egress_listeners = forwarded.value();
    ::close(std::exchange(pipes.egress[0], -1));
  }
  // The interpreter was forked by init, perhaps before init joined: it joins itself now.
  auto interpreter = only_child_of(init);
  if (!interpreter) return fail_with(interpreter.error());
  if (interpreter.value())
    if (auto attached = attach(*interpreter.value()); !attached && still_running(*interpreter.value()))
      return fail_with(attached.error());
  return isolated_child{.init = spawned{init, at},
                        .report_fd = std::exchange(pipes.report[0], -1),
                        .keepalive_fd = std::exchange(pipes.go[1], -1),
                        .egress_listeners = egress_listeners};
}

std::optional<init_report> read_init_report(int fd) {
  init_report report;
  if (posix::read_all(fd, &report, sizeof report).done != sizeof report) return std::nullopt;
  return report;
}

}  // namespace psych::launcher
