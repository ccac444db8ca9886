#include "namespaces.hpp"

#include "kernel_file.hpp"

#include <cerrno>

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>

namespace psych::launcher {

namespace {

constexpr unsigned long namespace_flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
                                          CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;

setup_result<void> write_proc_file(pid_t pid, const char* file, const std::string& text) {
  return write_kernel_file(launch_stage::namespaces, fmt::format("/proc/{}/{}", pid, file), text);
}

}  // namespace

const std::vector<std::string>& isolated_namespace_names() {
  static const std::vector<std::string> names{"user", "mount", "pid", "net", "ipc", "uts", "cgroup"};
  return names;
}

setup_result<pid_t> clone_into_namespaces() {
  // The raw call with no stack behaves like fork(): the child continues here on a copy of ours.
  const long pid = ::syscall(SYS_clone, namespace_flags | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
  if (pid < 0)
    return fail(system_failure(launch_stage::namespaces, "clone", errno,
                               "CLONE_NEWUSER|NEWNS|NEWPID|NEWNET|NEWIPC|NEWUTS|NEWCGROUP"));
  return static_cast<pid_t>(pid);
}

setup_result<void> write_id_maps(pid_t child, const namespace_identity& identity) {
  PSYCH_TRY(write_proc_file(child, "uid_map", fmt::format("0 {} 1\n", identity.host_uid)));
  if (!identity.privileged_writer) {
    PSYCH_TRY(write_proc_file(child, "setgroups", "deny"));
  }
  PSYCH_TRY(write_proc_file(child, "gid_map", fmt::format("0 {} 1\n", identity.host_gid)));
  return success();
}

setup_result<void> become_namespace_root(const namespace_identity& identity) {
  // Groups first, while the capability to change them is still ours. Unprivileged, setgroups is
  // denied by the map's rules, and the worker's groups show inside as nobody's.
  if (identity.privileged_writer && ::setgroups(0, nullptr) != 0)
    return fail(system_failure(launch_stage::identity, "setgroups", errno, "0, NULL"));
  if (::setresgid(0, 0, 0) != 0) return fail(system_failure(launch_stage::identity, "setresgid", errno, "0, 0, 0"));
  if (::setresuid(0, 0, 0) != 0) return fail(system_failure(launch_stage::identity, "setresuid", errno, "0, 0, 0"));
  uid_t ruid, euid, suid;
  if (::getresuid(&ruid, &euid, &suid) != 0) return fail(system_failure(launch_stage::identity, "getresuid", errno));
  if (ruid != 0 || euid != 0 || suid != 0)
    return fail(refusal(launch_stage::identity, fmt::format("the namespace's root did not stick: uid {}/{}/{}", ruid, euid, suid)));
  return success();
}

}  // namespace psych::launcher
