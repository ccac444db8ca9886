#pragma once
// The host's side of the Windows launcher's transport (docs/contract.md, "Channels on Windows"),
// the same under Wine from Linux and natively on Windows (host_os.hpp has what differs): this host
// listens on loopback, accepts only connections that prove the per-launch secret, starts
// psych-launch-windows.exe, and speaks the contract's frames with psych's own codec, each read
// within a deadline so a broken launcher fails a test instead of hanging it.
#include <chrono>
#include <deque>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host_os.hpp"
#include "psych/protocol/attach.hpp"
#include "psych/protocol/frames.hpp"
#include "psych/protocol/json.hpp"
#include "psych/protocol/line_reader.hpp"
#include "temp_dir.hpp"

namespace psych::testing::windows {

using namespace std::chrono_literals;
using os::deadline;

inline deadline in(std::chrono::milliseconds from_now) { return std::chrono::steady_clock::now() + from_now; }

/// One connection's frames, bounded by psych's line_reader as the bytes arrive.
class frame_socket {
 public:
  frame_socket() = default;
  explicit frame_socket(os::socket_handle socket, std::size_t max_frame_bytes = 16u << 20);
  frame_socket(frame_socket&& other) noexcept;
  frame_socket& operator=(frame_socket&& other) noexcept;
  ~frame_socket();

  [[nodiscard]] bool valid() const { return socket_ != os::no_socket; }
  /// The next line; nullopt at end of file or when `until` passes first.
  std::optional<std::string> next_line(deadline until);
  template <class Frame>
  void send(const Frame& frame) { send_raw(protocol::encode_frame(frame)); }
  void send_raw(std::string_view bytes);
  void close();

 private:
  os::socket_handle socket_ = os::no_socket;
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
  os::socket_handle socket_ = os::no_socket;
  std::uint16_t port_ = 0;
  std::string secret_;
  int dropped_ = 0;
};

/// A scratch tree for one launch, removed with it: workspace, tmp, a canary and the decoy that is
/// the launcher's stdin.
struct launch_dir {
  launch_dir();
  launch_dir(const launch_dir&) = delete;
  launch_dir& operator=(const launch_dir&) = delete;
  temp_dir root;
  std::filesystem::path workspace, tmp, canary, decoy;
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
  double seconds = 0;  ///< from starting the launcher to its exit
  std::size_t watched_before_leaving = 0;  ///< run_options::watched_marker
};

struct run_options {
  /// Send `cancel` (with this reason) this long after `run`.
  std::optional<std::chrono::milliseconds> cancel_after;
  protocol::cancel_reason cancel_reason = protocol::cancel_reason::cancelled;
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

/// Waits up to `timeout` for no process to hold `marker`; the ids still holding it then.
std::vector<os::process_id> wait_until_gone(std::string_view marker, std::chrono::milliseconds timeout);

/// launch, started (or error), hello, run, done, exit: one whole execution of `program`.
execution run_program(const launch_dir& dir, const protocol::launch_frame& launch, std::string_view program,
                      const run_options& options = {});

}  // namespace psych::testing::windows
