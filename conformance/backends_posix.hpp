#pragma once
// What only a POSIX host's suite has: a uid per child, /proc, System V IPC, shared world-writable
// directories, containers and the remote service (backends_posix.cpp).
#include "backends.hpp"
#include "host_leftovers.hpp"

namespace conformance {

/// The uid the suite's children run as, distinct from other tests'.
inline constexpr std::int64_t suite_uid = 1'500'100;

/// Processes of a uid still alive, and cgroups whose launcher is gone (host_leftovers.hpp).
using psych::testing::abandoned_cgroups;
using psych::testing::processes_of;

/// Executions running or queued on the remote backend's services: none may outlive a case.
std::uint64_t remote_executions_left();
/// Shuts down the remote backend's services (main(), after the run).
void stop_remote_services();

/// Containers of psych's (label psych.execution) that exist now, by id: none may outlive a case.
std::vector<std::string> containers_left();

/// The same backend, each execution drawing a uid of its own from first..first+count-1.
backend_under_test with_uid_range(const backend_under_test& backend, std::int64_t first, std::int64_t count);

/// As for_each_backend, for cases that must not share a uid with anything else: kill(-1),
/// System V IPC, files left in shared directories. A root worker runs every backend's child as
/// `uid`, which nothing else uses. An ordinary worker has no uid to give: at linux-isolated the
/// child runs as the worker's own uid behind its own user, pid, IPC and mount namespaces, and
/// what it left is told apart from what the worker had by a snapshot taken before the body;
/// linux-process, where the child would share the worker's uid with no namespace between them,
/// is reported as skipped. After the body it checks that the child's uid left nothing behind —
/// no new process, nothing in the temp root, no new entry of host_leftovers_of — and then
/// removes what it found, so that one breach fails its own case and does not cascade.
void for_each_backend_as(std::int64_t uid,
                         const std::function<void(psych::sandbox&, const backend_under_test&)>& body);

/// The child uid's processes, and its host_leftovers_of entries, that were not there when the
/// case began.
std::vector<int> processes_left_by(const backend_under_test& backend);
std::vector<std::string> host_leftovers_left_by(const backend_under_test& backend);

/// What `uid` owns on the host where an unprivileged program can leave something behind
/// after its processes are gone: entries reachable through world-writable directories under
/// /tmp, /var/tmp, /dev/shm and /run/lock (a sticky directory of somebody else's included),
/// and System V shared memory, message queues and semaphore sets. One line each.
/// (POSIX message queues cannot be listed without mounting mqueue; cases that make one
/// look for it by name.)
std::vector<std::string> host_leftovers_of(std::int64_t uid);
void remove_host_leftovers_of(std::int64_t uid);

/// Removes a tree of any depth (the host's own cleanup is what is under test, so this
/// does not share its code): `rm -rf`, which walks with openat, not with whole paths.
void remove_tree_of_any_depth(const std::string& path);

}  // namespace conformance
