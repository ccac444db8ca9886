#pragma once
// The conformance suite is one body of cases run against every backend.
// A backend that cannot be built here is reported as skipped with its reason
// (tests/support/skip.hpp), never as a pass: a skip is never evidence of support.
#include <doctest/doctest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "host_leftovers.hpp"
#include "psych/host/container_sandbox.hpp"
#include "psych/host/sandbox.hpp"
#include "skip.hpp"

namespace conformance {

struct backend_under_test {
  std::string name;
  /// A local backend's options; for the container backend only its isolation (isolated), uid and
  /// temp root, which the cases read, mirror `container`'s.
  psych::local_sandbox_options options;
  /// Set for the container backend, which is built from these with container_sandbox().
  std::optional<psych::container_sandbox_options> container;
  /// Set by for_each_backend_as: the host uid the child runs as, and what that uid already had
  /// when the case began (for a root worker, nothing; for an ordinary one, its own processes and
  /// files), so that what the case left is what appeared since.
  std::int64_t child_uid = -1;
  std::vector<int> processes_before;
  std::vector<std::string> host_entries_before;
  /// The remote backend: remote_sandbox() over TLS on loopback to an in-process psych serve
  /// (sandbox_service) whose backend is local_sandbox(options) — linux-namespaces, as linux-isolated.
  bool remote = false;
};

/// Whether the backend keeps prepared sandboxes waiting (docs/pools.md). While it lives, one of
/// them runs as the suite's uid with a directory in the temp root, so a case's own "nothing is
/// left" checks wait for the end of the case, when for_each_backend destroys the sandbox (and its
/// pool) first and then finds nothing left.
inline bool pooled(const backend_under_test& backend) { return backend.options.pool.size > 0; }

/// Whether the backend runs the program behind namespaces, where the pids it reports are its
/// own namespace's and mean nothing on the host.
inline bool isolated(const backend_under_test& backend) {
  return backend.options.isolation == psych::isolation_level::isolated;
}

/// Every backend the suite knows, available here or not: linux-process, linux-isolated, the
/// container backend (image $PSYCH_CONFORMANCE_IMAGE, default localhost/psych-python:bookworm,
/// which scripts/build-image makes), and remote (psych serve over TLS on loopback, running
/// linux-namespaces).
const std::vector<backend_under_test>& backends();

/// The backend's sandbox: local_sandbox(), container_sandbox(), or remote_sandbox() to a service.
psych::result<std::unique_ptr<psych::sandbox>> make_sandbox(const backend_under_test& backend);

/// Executions running or queued on the remote backend's services: none may outlive a case.
std::uint64_t remote_executions_left();
/// Shuts down the remote backend's services (main(), after the run).
void stop_remote_services();

/// Containers of psych's (label psych.execution) that exist now, by id: none may outlive a case.
std::vector<std::string> containers_left();

/// The same backend, each execution drawing a uid of its own from first..first+count-1.
backend_under_test with_uid_range(const backend_under_test& backend, std::int64_t first, std::int64_t count);

/// Runs body once per backend, each as its own SUBCASE; unavailable backends
/// are reported as skipped with the reason.
void for_each_backend(const std::function<void(psych::sandbox&, const backend_under_test&)>& body);
/// As above, over the backends `applies_to` accepts only. The others get no subcase at all, so a
/// case that does not apply to a backend never reads as passed on it; the case says why.
void for_each_backend(const std::function<bool(const backend_under_test&)>& applies_to,
                      const std::function<void(psych::sandbox&, const backend_under_test&)>& body);

/// The terms a runtime would compute: the backend's offer, narrowed by the request.
psych::execution_terms terms_for(const psych::sandbox& sandbox, psych::code_execution_limits limits = {},
                                 psych::isolation_level isolation = psych::isolation_level::process);

/// Runs one program with default test limits (a 20 s wall clock unless asked).
psych::sandbox_result run(psych::sandbox& sandbox, std::string program, psych::code_execution_limits limits = {},
                          std::stop_token stop = {});

/// The uid the suite's children run as, distinct from other tests'.
inline constexpr std::int64_t suite_uid = 1'500'100;

/// Processes of a uid still alive, and cgroups whose launcher is gone (host_leftovers.hpp).
using psych::testing::abandoned_cgroups;
using psych::testing::processes_of;
/// Entries left in the suite's temp root.
std::vector<std::string> leftovers_in_temp_root();
const std::string& temp_root();

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

/// Lines joined by newlines, for assertions that print what they found.
std::string joined(const std::vector<std::string>& lines);

}  // namespace conformance
