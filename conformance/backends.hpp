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
#include "psych/host/sandbox.hpp"
#include "skip.hpp"

namespace conformance {

struct backend_under_test {
  std::string name;
  psych::local_sandbox_options options;
};

/// Whether the backend runs the program behind namespaces, where the pids it reports are its
/// own namespace's and mean nothing on the host.
inline bool isolated(const backend_under_test& backend) {
  return backend.options.isolation == psych::isolation_level::isolated;
}

/// Every backend the suite knows, available here or not.
const std::vector<backend_under_test>& backends();

/// Runs body once per backend, each as its own SUBCASE; unavailable backends
/// are reported as skipped with the reason.
void for_each_backend(const std::function<void(psych::sandbox&, const backend_under_test&)>& body);

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

/// As for_each_backend, but every backend runs its child as `uid` (never the worker's own),
/// for cases that must not share a uid with anything else: kill(-1), System V IPC, files
/// left in shared directories. Needs a root worker; reported as skipped otherwise. After the
/// body it checks that the uid left nothing behind — no process, nothing in the temp root,
/// nothing of host_leftovers_of(uid) — and then removes whatever it found, so that one
/// breach fails its own case and does not cascade into the next.
void for_each_backend_as(std::int64_t uid,
                         const std::function<void(psych::sandbox&, const backend_under_test&)>& body);

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
