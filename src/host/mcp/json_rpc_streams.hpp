#pragma once
// The byte streams of one JSON-RPC peer (json_rpc_peer.cpp) and the waits of its two threads: what
// each system does differently, one half per system.
//   POSIX    descriptors made non-blocking; the reader poll()s input, side, the other side's
//            pidfd and a wake flag (an eventfd; a pipe on macOS); the writer writes without
//            blocking and poll()s for room.
//   Windows  overlapped pipe ends (output_pipe(), input_pipe()): the reader keeps one ReadFile in
//            flight per stream and waits on their events, the process handle and a wake event;
//            the writer has one WriteFile in flight, cancelled at its deadline.
// The one difference the peer sees: a Windows write is in flight before its bytes are counted
// (write_attempt::in_flight), where a POSIX one is counted at once.
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "os/os_handle.hpp"
#include "psych/result.hpp"

namespace psych::host {

class peer_streams {
 public:
  /// Takes `input` and `side` (read; side may be no_os_handle) and `output` (written); `gone` (not
  /// owned; no_os_handle for none) is ready once the other side has exited. Fails naming the call.
  static result<std::unique_ptr<peer_streams>> open(os_handle input, os_handle output, os_handle side, os_handle gone);
  ~peer_streams();
  peer_streams(const peer_streams&) = delete;
  peer_streams& operator=(const peer_streams&) = delete;

  /// For the writer's own thread, before it writes: on POSIX, a reader that closed its input makes
  /// a write fail with EPIPE on this thread rather than SIGPIPE end the host.
  static void prepare_writer_thread() noexcept;

  // ---- the reader thread ----

  struct ready {
    bool input = false;
    bool side = false;
    bool gone = false;
    bool woken = false;
  };
  /// Waits until something is ready.
  result<ready> wait();
  enum class drained { empty, more, ended };
  using sink = std::function<bool(std::string_view)>;
  /// What the stream has now, without waiting, and at most 16 buffers of it (`more`), so that one
  /// that never pauses cannot starve the others. `ended` at end of file, on an error, or when the
  /// sink says stop (false).
  drained drain_input(const sink& to);
  drained drain_side(const sink& to);
  /// The side stream ended: it is no longer waited on.
  void forget_side() noexcept;
  /// Makes the reader's wait return `woken`, now and for good. Any thread.
  void wake_reader() noexcept;

  // ---- the writer thread ----

  struct write_attempt {
    std::size_t bytes = 0;             ///< counted as written now
    bool would_block = false;          ///< nothing more can go before wait_writable
    bool in_flight = false;            ///< Windows: bytes begun and not yet counted
    std::optional<std::string> failed;  ///< the system's words: the other side closed its input
  };
  /// Writes what it can of `bytes` without waiting; after `deadline` nothing new is begun. On
  /// Windows a write in flight is collected here once it has completed.
  write_attempt try_write(std::string_view bytes, std::chrono::steady_clock::time_point deadline);
  /// Whether a write is in flight (Windows only).
  [[nodiscard]] bool write_in_flight() const noexcept;
  /// Waits until more can be written, or until `deadline` (on Windows, a write still in flight
  /// then is cancelled, and what it wrote is counted by the next try_write). False when woken.
  bool wait_writable(std::chrono::steady_clock::time_point deadline);
  /// Makes the writer's waits return false, now and for good. Any thread.
  void wake_writer() noexcept;
  /// Closes the output, so that the other side reads end of file; the writer has stopped.
  void close_output() noexcept;

 private:
  struct impl;
  explicit peer_streams(std::unique_ptr<impl> state);
  std::unique_ptr<impl> impl_;
};

}  // namespace psych::host
