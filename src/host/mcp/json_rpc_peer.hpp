#pragma once
// One JSON-RPC 2.0 session over a pair of byte streams, one message per line (MCP's stdio
// transport): requests matched to their answers by id, notifications, the other side's own
// requests answered, time limits with notifications/cancelled.
//
// Two threads of its own. The reader only reads: every line goes to the request that waits for it,
// or to the handlers; an answer to the other side's request is queued, never written from the
// reader. The writer writes the queue in order. So a peer that floods requests while it does not
// read its input can never stop this side reading, and the queue is bounded: past the bound the
// peer is broken for good (the other side does not read).
//
// The errors are MCP's (mcp_error_kind), MCP being this peer's one user.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "os/os_handle.hpp"
#include "psych/host/mcp.hpp"

namespace psych::host {

class json_rpc_peer {
 public:
  struct options {
    /// The server's name, for messages: "the server fs", "tools/call on fs".
    std::string server_name;
    /// The limit of one line read, and of the bytes queued for writing (the answers to the other
    /// side's requests and the notifications; a request of ours is never refused for room).
    std::size_t max_line_bytes = std::size_t{16} << 20;
    std::size_t max_queued_bytes = std::size_t{4} << 20;
    /// The limit for writing an answer to the other side's request, or a notification.
    std::chrono::milliseconds write_limit{30000};
  };

  struct handlers {
    /// A request of the other side's: the `result` JSON to answer with, or nullopt for "method not
    /// found". Called on the reader thread; must not block.
    std::function<std::optional<std::string>(std::string_view method)> request;
    /// A notification of the other side's. Called on the reader thread; must not block.
    std::function<void(std::string_view method)> notification;
    /// Bytes of a side stream read beside the messages (a server's stderr). Reader thread.
    std::function<void(std::string_view bytes)> side_bytes;
    /// Why the other side is gone, appended to the message that says it went: its exit status,
    /// its last words. May be called on either thread.
    std::function<std::string()> epitaph;
  };

  /// Takes ownership of `input` (read), `output` (written) and `side` (read into side_bytes;
  /// no_os_handle for none). `gone` (not owned; no_os_handle for none) is ready once the other
  /// side has exited: what it wrote before is read, then the peer breaks. Starts both threads. On
  /// Windows the three are overlapped pipe ends (output_pipe(), input_pipe()); json_rpc_streams.hpp
  /// has what each system does.
  json_rpc_peer(options opts, handlers on, os_handle input, os_handle output, os_handle side, os_handle gone);
  /// Stops both threads (close_output, then the reader) and closes the descriptors it owns.
  ~json_rpc_peer();
  json_rpc_peer(const json_rpc_peer&) = delete;
  json_rpc_peer& operator=(const json_rpc_peer&) = delete;

  /// Sends a request and waits for its answer: the raw `result` text. Past `timeout` or at `stop`
  /// it is abandoned: a request never written is dropped from the queue; one written is followed,
  /// when `cancellable`, by notifications/cancelled; a late answer is dropped.
  mcp_result<std::string> request(std::string_view method, std::string params_json, std::chrono::milliseconds timeout,
                                  std::stop_token stop, bool cancellable = true);
  /// Queues a notification (best effort: a broken peer has said why already).
  void notify(std::string_view method, std::string params_json);

  /// False once broken: every waiting request and every later one fails at once.
  [[nodiscard]] bool usable() const;
  /// Why it is broken; nullopt while usable.
  [[nodiscard]] std::optional<mcp_error> broken() const;
  /// Breaks the peer (no-op if broken already).
  void break_with(mcp_error_kind kind, std::string detail);

  /// Stops the writer and closes the output: the other side reads end of file. Lines still queued
  /// are not written.
  void close_output();

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace psych::host
