#pragma once
// The host's side of the Windows launcher's transport (docs/contract.md, "Channels on Windows"),
// driven from Linux: psych-launch-windows.exe runs under Wine in a throwaway prefix, and this host
// listens on loopback, accepts only connections that prove the per-launch secret, and speaks the
// contract's frames with psych's own codec, each read within a deadline so a broken launcher fails
// a test instead of hanging it.
#include <chrono>
#include <deque>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "psych/protocol/attach.hpp"
#include "psych/protocol/frames.hpp"
#include "psych/protocol/json.hpp"
#include "psych/protocol/line_reader.hpp"
#include "temp_dir.hpp"

namespace psych::testing::windows {

using namespace std::chrono_literals;
using deadline = std::chrono::steady_clock::time_point;

inline deadline in(std::chrono::milliseconds from_now) { return std::chrono::steady_clock::now() + from_now; }

/// Why the launcher cannot be run here (no mingw-w64 build of it, no wine64), or nullopt.
std::optional<std::string> why_wine_cannot_run();

/// A Linux path as Wine's Z: drive shows it.
std::string windows_path(const std::filesystem::path& path);

/// A WINEPREFIX of its own in a temp dir, made on first use (wineboot) and ended with the test
/// binary: its wineserver is stopped (`wineserver -k`) and the directory removed.
class wine_prefix {
 public:
  /// The one prefix of this test binary.
  static wine_prefix& shared();
  ~wine_prefix();
  wine_prefix(const wine_prefix&) = delete;
  wine_prefix& operator=(const wine_prefix&) = delete;

  /// WINEPREFIX, WINEDEBUG and the rest of the environment every Wine process here gets.
  [[nodiscard]] std::vector<std::string> environment() const;
  [[nodiscard]] const std::filesystem::path& scratch() const { return dir_.path(); }
  [[nodiscard]] double creation_seconds() const { return creation_seconds_; }

 private:
  wine_prefix();
  temp_dir dir_;
  double creation_seconds_ = 0;
  pid_t keeper_ = -1;
};

/// One connection's frames, bounded by psych's line_reader as the bytes arrive.
class frame_socket {
 public:
  frame_socket() = default;
  explicit frame_socket(int fd, std::size_t max_frame_bytes = 16u << 20);
  frame_socket(frame_socket&& other) noexcept;
  frame_socket& operator=(frame_socket&& other) noexcept;
  ~frame_socket();

  [[nodiscard]] bool valid() const { return fd_ >= 0; }
  /// The next line; nullopt at end of file or when `until` passes first.
  std::optional<std::string> next_line(deadline until);
  template <class Frame>
  void send(const Frame& frame) { send_raw(protocol::encode_frame(frame)); }
  void send_raw(std::string_view bytes);
  void close();

 private:
  int fd_ = -1;
  protocol::line_reader reader_;
  std::deque<std::string> lines_;
  bool eof_ = false;
};

/// The host's loopback listener for one launch: 127.0.0.1, a port of the kernel's choosing, and a
/// fresh 128-bit secret. A connection counts only once its first line is an `attach` frame with
/// that secret, sent within a short deadline; anything else is dropped and the wait goes on.
class attach_listener {
 public:
  attach_listener();
  ~attach_listener();
  attach_listener(const attach_listener&) = delete;
  attach_listener& operator=(const attach_listener&) = delete;

  [[nodiscard]] std::uint16_t port() const { return port_; }
  [[nodiscard]] const std::string& secret() const { return secret_; }
  /// How many connections were dropped for not proving the secret.
  [[nodiscard]] int dropped() const { return dropped_; }

  /// The first connection that proves the secret and names `stream`; nullopt at `until`.
  std::optional<frame_socket> accept(protocol::attached_stream stream, deadline until);
  /// No further connection is accepted: once both streams are attached, the port is closed.
  void close();

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::string secret_;
  int dropped_ = 0;
};

/// psych-launch-windows.exe under Wine: stdin a decoy file (the child must not inherit it),
/// stdout and stderr pipes the host drains, PSYCH_HOST_PORT and PSYCH_HOST_SECRET set.
class launcher_process {
 public:
  launcher_process(wine_prefix& prefix, const attach_listener& listener, const std::string& stdin_file);
  ~launcher_process();  ///< SIGKILLs a launcher a failed test left running
  launcher_process(const launcher_process&) = delete;
  launcher_process& operator=(const launcher_process&) = delete;

  /// Its exit status, waiting at most `timeout`; -1 if it had to be killed.
  int wait(std::chrono::milliseconds timeout = 30s);
  /// SIGKILL, as a crash or an OOM killer would end it.
  void kill();
  std::string drain_stdout() { return drain(stdout_); }
  std::string drain_stderr() { return drain(stderr_); }

 private:
  static std::string drain(int& fd);
  pid_t pid_ = -1;
  int stdout_ = -1, stderr_ = -1;
};

/// A scratch tree for one launch, removed with it: workspace, tmp, a canary and the decoy that is
/// the launcher's stdin.
struct launch_dir {
  launch_dir();
  launch_dir(const launch_dir&) = delete;
  launch_dir& operator=(const launch_dir&) = delete;
  temp_dir root;
  std::string workspace, tmp, canary, decoy;
};

/// A launch frame that should succeed: the test child as the interpreter, the worker's own
/// account allowed, an environment of two variables, modest limits.
protocol::launch_frame default_launch(const launch_dir& dir);

/// Everything one execution produced, host side.
struct execution {
  std::optional<protocol::started_frame> started;
  std::optional<protocol::launch_error_frame> error;
  std::optional<protocol::hello_frame> hello;
  std::optional<protocol::done_frame> done;
  std::optional<protocol::exit_frame> exit;
  std::string stdout_text, stderr_text;
  int launcher_status = -1;
  int dropped_connections = 0;
  double seconds = 0;  ///< from starting Wine to the launcher's exit
  std::size_t watched_before_leaving = 0;  ///< run_options::watched_marker
};

struct run_options {
  /// Send `cancel` (with this reason) this long after `run`.
  std::optional<std::chrono::milliseconds> cancel_after;
  std::string cancel_reason = "cancelled";
  /// Send `cancel` in the same write as `launch`.
  bool cancel_with_launch = false;
  /// Connect to the listener before the launcher does and present this instead of the secret.
  std::optional<std::string> impostor_secret;
  /// This long after `run`, the host goes away (closes control), or the launcher is killed.
  std::optional<std::chrono::milliseconds> host_leaves_after, launcher_killed_after;
  /// Before the host leaves or kills the launcher, it waits (up to 10 s) for this many processes
  /// whose command line holds watched_marker, and counts them.
  std::string watched_marker;
  std::size_t watched_count = 0;
};

/// Waits up to `timeout` for no process to hold `marker`; the pids still holding it then.
std::vector<pid_t> wait_until_gone(std::string_view marker, std::chrono::milliseconds timeout);

/// The Linux pids of the Wine processes whose command line holds `marker` (a Windows process's
/// command line shows in /proc/<pid>/cmdline under Wine).
std::vector<pid_t> wine_processes_with(std::string_view marker);

/// launch, started (or error), hello, run, done, exit: one whole execution of `program`.
execution run_program(const launch_dir& dir, const protocol::launch_frame& launch, std::string_view program,
                      const run_options& options = {});

}  // namespace psych::testing::windows
