#pragma once
// A minimal blocking host for the launcher's tests: it creates the four
// streams of docs/contract.md, spawns psych-launch-linux with them as fds
// 0-4, and reads frames with deadlines so a broken launcher fails a test
// instead of hanging it.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include <sys/types.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <rapidjson/document.h>

#include "psych/protocol/frames.hpp"
#include "psych/protocol/json.hpp"
#include "skip.hpp"

namespace psych::testing {

using namespace std::chrono_literals;

/// The uid:gid the tests drop to; no account needs to exist for it. Below the host's default
/// run_as_range (1500000..1501023): a host test running beside these (the soak, the conformance
/// suite) leases uids from that range one after another, and one of them must never be a uid
/// whose processes these tests count or kill.
inline constexpr std::int64_t test_uid = 1400000;

/// The interpreter: $PSYCH_TEST_PYTHON, else the real file behind /usr/bin/python3 (a pyenv
/// shim is a shell script that reads the environment the launcher deliberately withholds).
std::string test_python();

/// A scratch tree owned by root: <root>/workspace, <root>/tmp and a root-only canary in its own
/// directory. Removed, with whatever the child left in it, on destruction.
struct scratch {
  scratch();
  ~scratch();
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;
  std::string root, workspace, tmp, canary;
};

/// A launch frame that should succeed: run_as test_uid, network none, generous limits.
protocol::launch_frame default_launch(const scratch& dir);

/// The Landlock ABI the launcher applies on this kernel (0: none), as landlock.cpp negotiates it.
int launcher_landlock_abi();

/// The launcher tests drop to another uid and chown the workspace: they need root, as CI has.
/// Reports the case as skipped otherwise.
inline bool have_root(std::source_location where = std::source_location::current()) {
  if (::geteuid() == 0) return true;
  psych::testing::skip_case("the launcher tests need root (they drop to another uid)", where);
  return false;
}

/// Lines from a blocking fd, each within a deadline.
class line_source {
 public:
  explicit line_source(int fd) : fd_(fd) {}
  /// The next line without its '\n'; nullopt at EOF or when `timeout` passes first.
  std::optional<std::string> next(std::chrono::milliseconds timeout);
  [[nodiscard]] bool at_eof() const noexcept { return eof_; }

 private:
  int fd_;
  std::string buffer_;
  bool eof_ = false;
};

/// One launcher process with the contract's fd layout.
class launcher {
 public:
  launcher();
  ~launcher();  ///< SIGKILLs a launcher a failed test left running
  launcher(const launcher&) = delete;
  launcher& operator=(const launcher&) = delete;

  template <class Frame>
  void send(const Frame& frame) { send_raw(protocol::encode_frame(frame)); }
  void send_raw(std::string_view bytes);
  template <class Frame>
  void send_channel(const Frame& frame) { write_all(channel_, protocol::encode_frame(frame)); }
  std::optional<std::string> control_line(std::chrono::milliseconds timeout = 15s) {
    return control_lines_.next(timeout);
  }
  std::optional<std::string> channel_line(std::chrono::milliseconds timeout = 15s) {
    return channel_lines_.next(timeout);
  }
  void close_control();
  /// shutdown(SHUT_WR): the launcher reads EOF, and its reply can still be read.
  void end_control_writes();
  /// Waits (bounded) for the launcher to exit; its exit status, or -1 if it had to be killed.
  int wait(std::chrono::milliseconds timeout = 20s);
  /// The program's stdout and stderr, read to EOF (the tree is gone, so EOF comes).
  std::string drain_stdout() { return drain(stdout_); }
  std::string drain_stderr() { return drain(stderr_); }
  [[nodiscard]] pid_t pid() const noexcept { return pid_; }

 private:
  static void write_all(int fd, std::string_view bytes);
  static std::string drain(int fd);
  pid_t pid_ = -1;
  int control_ = -1, channel_ = -1, stdout_ = -1, stderr_ = -1;
  line_source control_lines_{-1}, channel_lines_{-1};
};

/// Everything one execution produced, host side.
struct execution {
  std::optional<protocol::started_frame> started;
  std::optional<protocol::launch_error_frame> error;
  std::optional<std::string> hello;  ///< raw JSON: the bootstrap's frame, read with RapidJSON
  std::optional<std::string> done;
  std::optional<protocol::exit_frame> exit;
  std::string stdout_text, stderr_text;
  int launcher_status = -1;  ///< the launcher's exit code
};

struct run_options {
  /// Send `cancel` this long after `run` (and its reason).
  std::optional<std::chrono::milliseconds> cancel_after;
  protocol::cancel_reason cancel_reason = protocol::cancel_reason::cancelled;
};

/// launch, started (or error), hello, run, done, exit.
execution run_program(const protocol::launch_frame& launch, std::string_view program,
                      const run_options& options = {});

/// Only the launch: for requests that must end in an `error` frame.
execution launch_only(const protocol::launch_frame& launch);

rapidjson::Document parse_json(const std::string& text);

/// True when no process with this pid exists any more (not even as a zombie).
bool process_gone(pid_t pid);

}  // namespace psych::testing
