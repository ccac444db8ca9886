#pragma once
// ISOLATED: the interpreter behind a kernel boundary. One clone() makes the namespaces
// (namespaces.hpp); its child is the sandbox's init, pid 1 of the new pid namespace, whose
// death kills everything in it. Init becomes the namespace's root, pivots into a minimal root
// (mount_root.hpp), forks the interpreter and reaps until the interpreter ends. The interpreter's
// child drops every capability, sets NoNewPrivs, restricts itself with Landlock where the kernel
// offers it, installs the seccomp filter last, and execs.
#include <cstdint>
#include <functional>
#include <optional>

#include <sys/resource.h>
#include <sys/types.h>

#include "setup_error.hpp"
#include "landlock.hpp"
#include "mount_root.hpp"
#include "namespaces.hpp"
#include "spawn.hpp"
#include "supervise.hpp"  // init_report: what init reports when the interpreter has ended

namespace psych::launcher {

struct isolated_plan {
  child_plan child;  ///< the interpreter's setup; identity is unused (the namespace maps it)
  root_plan root;
  namespace_identity identity;
  landlock_paths landlock;  ///< as seen inside the new root
  /// network=allowlist: init listens at this port inside the namespace for psych's egress proxy
  /// (egress_listener.hpp), and the launcher hands the listeners to `egress_handover`. 0: none.
  std::uint16_t egress_port = 0;
  int egress_handover = -1;
};

struct isolated_child {
  spawned init;              ///< the init's pid on the host; the wall clock starts at the clone
  int report_fd = -1;        ///< init_report arrives here; the launcher owns and closes it
  int keepalive_fd = -1;     ///< held open by the launcher: init sees its hangup if the launcher dies
  int egress_listeners = 0;  ///< how many listeners went to the host (network=allowlist)
};

/// `attach` puts a process into the execution's cgroup: init once it may proceed, then the
/// interpreter once it has exec'd; both before this returns, so before any program arrives. A
/// failure there ends init and is returned.
setup_result<isolated_child> spawn_isolated(const isolated_plan& plan,
                                            const std::function<setup_result<void>(pid_t)>& attach);

/// After the launcher reaped init: the interpreter's end as init saw it, if init got to report it
/// (a killed init reports nothing).
std::optional<init_report> read_init_report(int fd);

}  // namespace psych::launcher
