#include "execution/launcher_process.hpp"

#include <fmt/format.h>

#include "os/child_process.hpp"
#include "os/host_environment.hpp"
#include "psych/protocol/attach.hpp"

namespace psych::host {


result<launcher_process> spawn_launcher(const std::string& launcher_path, const launcher_fds& fds) {
  child_spec spec{
      .argv = {launcher_path},
      .search_path = false,
      .environment = {},  // the launcher needs nothing from the host's environment but where to attach
      .descriptors = {no_os_handle, fds.stdout_write, fds.stderr_write},
  };
  // and, where the deployment configured one, the cgroup its executions' cgroups go in (docs/cgroups.md).
  if (const auto parent = environment_value(std::string(protocol::cgroup_parent_variable)); parent && !parent->empty())
    spec.environment.push_back(fmt::format("{}={}", protocol::cgroup_parent_variable, *parent));
  if (fds.attach) {
    spec.environment.push_back(fmt::format("{}={}", protocol::host_port_variable, fds.attach->port));
    spec.environment.push_back(fmt::format("{}={}", protocol::host_secret_variable, fds.attach->secret));
  } else {
#ifdef _WIN32
    return fail_with(error_kind::launcher_unavailable,
                   "a launcher on Windows attaches over loopback: it cannot be given control and the channel as handles");
#else
    spec.descriptors.insert(spec.descriptors.end(), {fds.control, fds.channel});
    if (fds.egress_handover >= 0) spec.descriptors.push_back(fds.egress_handover);
#endif
  }
  auto spawned = child_process::spawn(spec);
  if (!spawned) {
    const spawn_error& e = spawned.error();
    // Starting it failing means the launcher itself cannot be run; anything else is the host's.
    const bool start_failed = e.call.starts_with("posix_spawn") || e.call.starts_with("CreateProcessW");
    return fail_with(start_failed ? error_kind::launcher_unavailable : error_kind::system_call_failed, e.message());
  }
  const auto held = spawned.value().release();
  return launcher_process{held.pid, held.pidfd};
}

int reap_launcher(const launcher_process& process) {
  return child_process::reap_pidfd(process.pid, process.pidfd).code;
}

}  // namespace psych::host
