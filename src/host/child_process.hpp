#pragma once
// A child process the host starts (the launcher, an MCP server), held by a descriptor that polls
// readable once it exited, so that waiting fits an event loop, and signalled and reaped only while
// unreaped, so never a reused pid. The descriptor is a pidfd on Linux; on macOS, which has none, a
// kqueue watching the child's NOTE_EXIT (the names below say pidfd for both).
//
// The child gets exactly the descriptors it is given (everything else is closed before exec), an
// environment built from nothing but the caller's list, every signal at its default disposition
// with an empty mask, and a process group of its own: a terminal's ^C reaches the host (which ends
// its children in order) rather than them, and the child can be signalled whole.
#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include <boost/outcome/basic_result.hpp>
#include <boost/outcome/policy/terminate.hpp>

namespace psych::host {

struct child_spec {
  /// argv[0] is the program: a path, or with search_path a name looked up on the host's PATH.
  std::vector<std::string> argv;
  bool search_path = false;
  /// "NAME=value" entries; nothing of the host's environment is passed unless it is listed here.
  std::vector<std::string> environment;
  /// descriptors[i] becomes descriptor i of the child; -1 is /dev/null (read-only as 0, write-only
  /// otherwise). The caller keeps its own descriptors and closes them after spawn.
  std::vector<int> descriptors;
};

/// Why a child could not be started: the call and its errno.
struct spawn_error {
  std::string call;  ///< "posix_spawnp(/usr/bin/node)", "pidfd_open(1234)"
  int error = 0;
  [[nodiscard]] std::string message() const;
};

class child_process;
using spawn_result = boost::outcome_v2::basic_result<child_process, spawn_error, boost::outcome_v2::policy::terminate>;

/// How a reaped child ended, as a shell reports it: the exit status, or 128 + the signal.
struct exit_status {
  int code = -1;  ///< -1 when it could not be read
  [[nodiscard]] std::string text() const;  ///< "exited with status 3", "killed by signal 9"
};

class child_process {
 public:
  static spawn_result spawn(const child_spec& spec);

  /// A child still held is killed (SIGKILL to its process group) and reaped.
  ~child_process();
  child_process(child_process&& other) noexcept;
  child_process& operator=(child_process&& other) noexcept;
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  /// The child's pid, which is also its process group's id; -1 once reaped or released.
  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  /// Readable once the child has exited.
  [[nodiscard]] int pidfd() const noexcept { return pidfd_; }

  /// True when the child exited within `limit` (it is not reaped).
  [[nodiscard]] bool wait_exit(std::chrono::milliseconds limit) const;
  /// How it ended, without reaping it: "exited with status 3", "killed by signal 9", or
  /// "still running" when it has not exited within `limit`.
  [[nodiscard]] std::string status_text(std::chrono::milliseconds limit) const;
  /// Signals the child's whole process group. Safe until reaped: an unreaped leader keeps the
  /// group's id from being reused.
  void signal_group(int signal) const noexcept;
  /// Waits for the child to exit and reaps it; the pidfd is closed.
  exit_status reap();

  /// Gives up ownership: the caller holds the pid and the pidfd, and reaps with reap_pidfd.
  struct released {
    pid_t pid;
    int pidfd;
  };
  released release() noexcept;

  /// Reaps the exited child `pid` held by `pidfd` (waiting for it to exit); the pidfd stays open.
  static exit_status reap_pidfd(pid_t pid, int pidfd);
  /// Sends `signal` to the unreaped child `pid` held by `pidfd` (not its group).
  static void signal_held(pid_t pid, int pidfd, int signal) noexcept;

 private:
  child_process(pid_t pid, int pidfd) noexcept : pid_{pid}, pidfd_{pidfd} {}
  void end() noexcept;
  pid_t pid_ = -1;
  int pidfd_ = -1;
};

}  // namespace psych::host
