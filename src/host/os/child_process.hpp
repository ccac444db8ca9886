#pragma once
// A child process the host starts (the launcher, an MCP server), held by a handle that signals
// once it exited, so that waiting fits an event loop, and signalled and reaped only while
// unreaped, so never a reused pid. The handle is a pidfd on Linux; on macOS, which has none, a
// kqueue watching the child's NOTE_EXIT; on Windows the process handle (the names below say pidfd
// for all three).
//
// The child gets exactly the descriptors it is given (everything else is closed before exec; on
// Windows an explicit handle list), an environment built from nothing but the caller's list, every
// signal at its default disposition with an empty mask, and a process group of its own (on
// Windows a job): a terminal's ^C reaches the host (which ends its children in order) rather than
// them, and the child can be ended whole. child_process_posix.cpp and child_process_windows.cpp.
#include <sys/types.h>  // pid_t, which mingw-w64 has too

#include <chrono>
#include <string>
#include <vector>

#include <boost/outcome/basic_result.hpp>
#include <boost/outcome/policy/terminate.hpp>

#include "os/os_handle.hpp"

namespace psych::host {

struct child_spec {
  /// argv[0] is the program: a path, or with search_path a name looked up on the host's PATH.
  std::vector<std::string> argv;
  bool search_path = false;
  /// "NAME=value" entries; nothing of the host's environment is passed unless it is listed here.
  std::vector<std::string> environment;
  /// descriptors[i] becomes descriptor i of the child; no_os_handle is /dev/null (read-only as 0,
  /// write-only otherwise). The caller keeps its own descriptors and closes them after spawn. On
  /// Windows only 0-2 exist (stdin, stdout, stderr; NUL for none): a fourth is refused.
  std::vector<os_handle> descriptors;
};

/// Why a child could not be started: the call and its errno (on Windows, its GetLastError()).
struct spawn_error {
  std::string call;  ///< "posix_spawnp(/usr/bin/node)", "pidfd_open(1234)", "CreateProcessW(python.exe)"
  int error = 0;
  [[nodiscard]] std::string message() const;
};

class child_process;
using spawn_result = boost::outcome_v2::basic_result<child_process, spawn_error, boost::outcome_v2::policy::terminate>;

/// How a reaped child ended, as a shell reports it: the exit status, or 128 + the signal. On
/// Windows the exit code as a signed 32-bit value (an NTSTATUS such as 0xC0000005 is negative).
struct exit_status {
  int code = -1;  ///< -1 when it could not be read
  /// "exited with status 3", "killed by signal 9"; on Windows "ended with exception 0xC0000005".
  [[nodiscard]] std::string text() const;
};

/// How the host ends a child. POSIX asks with SIGTERM and insists with SIGKILL; Windows has no
/// request a process without a window must heed, so there both terminate it.
enum class ending { ask, kill };

class child_process {
 public:
  static spawn_result spawn(const child_spec& spec);

  /// A child still held is killed (SIGKILL to its process group; on Windows its job) and reaped.
  ~child_process();
  child_process(child_process&& other) noexcept;
  child_process& operator=(child_process&& other) noexcept;
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  /// The child's pid, which is also its process group's id; -1 once reaped or released.
  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  /// Readable (on Windows, signalled) once the child has exited.
  [[nodiscard]] os_handle pidfd() const noexcept { return pidfd_; }

  /// True when the child exited within `limit` (it is not reaped).
  [[nodiscard]] bool wait_exit(std::chrono::milliseconds limit) const;
  /// How it ended, without reaping it: "exited with status 3", "killed by signal 9", or
  /// "still running" when it has not exited within `limit`.
  [[nodiscard]] std::string status_text(std::chrono::milliseconds limit) const;
  /// Signals the child's whole process group (on Windows, terminates its job). Safe until reaped:
  /// an unreaped leader keeps the group's id from being reused.
  void signal_group(ending how) const noexcept;
  /// Waits for the child to exit and reaps it; the pidfd is closed.
  exit_status reap();

  /// Gives up ownership: the caller holds the pid and the pidfd, and reaps with reap_pidfd.
  struct released {
    pid_t pid;
    os_handle pidfd;
  };
  released release() noexcept;

  /// Reaps the exited child `pid` held by `pidfd` (waiting for it to exit); the pidfd stays open.
  static exit_status reap_pidfd(pid_t pid, os_handle pidfd);
  /// Ends the unreaped child `pid` held by `pidfd` (not its group).
  static void signal_held(pid_t pid, os_handle pidfd, ending how) noexcept;

 private:
#ifdef _WIN32
  child_process(pid_t pid, os_handle process, os_handle job) noexcept : pid_{pid}, pidfd_{process}, job_{job} {}
#else
  child_process(pid_t pid, os_handle pidfd) noexcept : pid_{pid}, pidfd_{pidfd} {}
#endif
  void end() noexcept;
  pid_t pid_ = -1;
  os_handle pidfd_ = no_os_handle;
#ifdef _WIN32
  /// The job the child and its descendants are in: its group. Closed when reaped or released
  /// (it does not kill on close: a released launcher outlives it).
  os_handle job_ = no_os_handle;
#endif
};

}  // namespace psych::host
