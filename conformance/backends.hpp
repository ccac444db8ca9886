#pragma once
// The conformance suite is one body of cases run against every backend.
// A backend that cannot be built here is reported as skipped with its reason
// (tests/support/skip.hpp), never as a pass: a skip is never evidence of support.
//
// This header is what every platform's suite shares (backends_common.cpp, and backends_posix.cpp or
// backends_windows.cpp for the platform's own backends and its census of what a case left);
// backends_posix.hpp adds what only a POSIX host has: uids, /proc, System V IPC, containers, remote.
#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

/// Whether the backend's programs run on Windows, where a program has no fork, no setsid, no
/// symlink without a privilege, no mkfifo, and the processes it starts are a job's.
inline bool on_windows(const backend_under_test& backend) { return backend.name.starts_with("windows"); }

/// Python that defines `write_channel(data)`, which writes raw bytes to the program's channel to the
/// host, past the bootstrap, as a hostile program would: fd 3 on POSIX; on Windows the channel's
/// socket, found among the interpreter's objects (docs/contract.md, "Channels on Windows").
inline std::string channel_writer(const backend_under_test& backend) {
  if (on_windows(backend))
    return "import gc\n"
           "_channel = next(o for o in gc.get_objects() if type(o).__name__ == 'SocketChannel')\n"
           "def write_channel(data):\n    _channel.sock.sendall(data)\n";
  return "import os\ndef write_channel(data):\n    os.write(3, data)\n";
}

/// Every backend the suite knows, available here or not. On Linux: linux-process, linux-isolated,
/// the container backend (image $PSYCH_CONFORMANCE_IMAGE, default localhost/psych-python:bookworm,
/// which scripts/build-image makes), and remote (psych serve over TLS on loopback, running
/// linux-namespaces); on macOS, macos-process; on Windows, windows-process (CPython from
/// $PSYCH_WINDOWS_PYTHON, the launcher beside the suite's binary).
const std::vector<backend_under_test>& backends();

/// The backend's sandbox, or nullptr once the case has been reported as skipped with the reason
/// the backend cannot be had here (for_each_backend's own way in, for cases that build a backend
/// from changed options).
std::unique_ptr<psych::sandbox> sandbox_or_skip(const backend_under_test& backend);

/// The backend's sandbox: local_sandbox(), container_sandbox(), or remote_sandbox() to a service.
psych::result<std::unique_ptr<psych::sandbox>> make_sandbox(const backend_under_test& backend);

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

/// Entries left in the suite's temp root.
std::vector<std::string> leftovers_in_temp_root();
const std::string& temp_root();

/// A fresh directory beside the temp root for a case's own files (a BlobStore, a run log), named
/// `prefix` and a random suffix; on POSIX mode 0711, so a child of the suite's uid can pass through.
/// The case removes it.
std::string make_scratch_directory(std::string_view prefix);

/// Sets a variable of this process's environment, or with nullopt removes it.
void set_host_variable(const std::string& name, const std::optional<std::string>& value);

/// Whether the process `pid` (as the host numbers it) is still running.
bool process_running(std::int64_t pid);

/// What main() does after the run: the platform's services stopped, the temp root removed.
void after_the_run();

/// Lines joined by newlines, for assertions that print what they found.
std::string joined(const std::vector<std::string>& lines);

}  // namespace conformance
