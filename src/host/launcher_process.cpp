#include "launcher_process.hpp"

#include <fmt/format.h>

#include "child_process.hpp"

namespace psych::host {

result<launcher_process> spawn_launcher(const std::string& launcher_path, const launcher_fds& fds) {
  auto spawned = child_process::spawn({
      .argv = {launcher_path},
      .search_path = false,
      .environment = {},  // the launcher needs nothing from the host's environment
      .descriptors = {-1, fds.stdout_write, fds.stderr_write, fds.control, fds.channel},
  });
  if (!spawned) {
    const spawn_error& e = spawned.error();
    // posix_spawn failing means the launcher itself cannot be run; anything else is the host's.
    return failure(e.call.starts_with("posix_spawn") ? error_kind::launcher_unavailable : error_kind::system_call_failed,
                   e.message());
  }
  const auto held = spawned.value().release();
  return launcher_process{held.pid, held.pidfd};
}

int reap_launcher(const launcher_process& process) {
  return child_process::reap_pidfd(process.pid, process.pidfd).code;
}

}  // namespace psych::host
