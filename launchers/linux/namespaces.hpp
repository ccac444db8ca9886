#pragma once
// The namespaces of an ISOLATED execution: user, mount, pid, net, ipc, uts and cgroup, all made
// by one clone(). The child of that clone is the sandbox's init (pid 1 of the new pid
// namespace); it waits until the launcher, still outside, has written its uid and gid maps.
#include <string>
#include <vector>

#include <sys/types.h>

#include "setup_error.hpp"

namespace psych::launcher {

/// Who the sandbox's root is on the host. As root the launcher maps it to the dedicated
/// unprivileged run_as uid/gid, never to host root; unprivileged, to the worker's own ids,
/// the only ones an unprivileged process may map.
struct namespace_identity {
  uid_t host_uid = 0;
  gid_t host_gid = 0;
  bool privileged_writer = false;  ///< the launcher is root: setgroups stays allowed so init can clear them
};

/// The names the reports use, in the order of the clone flags.
const std::vector<std::string>& isolated_namespace_names();

/// clone(2) without CLONE_VM, like fork(), into every namespace above. Returns the child's pid in
/// the parent and 0 in the child. The launcher is single-threaded, so the child may allocate.
setup_result<pid_t> clone_into_namespaces();

/// From the parent: "0 <host_uid> 1" and "0 <host_gid> 1", and setgroups "deny" unless the writer
/// is privileged. Nothing else is mapped, so every other host id is nobody inside.
setup_result<void> write_id_maps(pid_t child, const namespace_identity& identity);

/// In init, once the maps exist: become the namespace's root (the host's run_as), clear the
/// supplementary groups where that is allowed, and read the ids back.
setup_result<void> become_namespace_root(const namespace_identity& identity);

}  // namespace psych::launcher
