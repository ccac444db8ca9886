#pragma once
// psych as an MCP server (`psych mcp`, docs/mcp-server.md): any MCP client's model gets `run_code`,
// one Python program per call that loops over the tools of the upstream servers psych is given, and
// `read_tool_output` for the handles its own executions made. Nothing else.
//
// Two layers. An mcp_server_session is one MCP session, transport-free: it takes one JSON-RPC
// message at a time and answers through the sink it is handed with the message, so the stdio
// transport (one session, answers on standard output) and Streamable HTTP (a session per
// Mcp-Session-Id, each answer on the POST that asked) drive the same code. One session is one Run:
// its executions share the Run's meters from the session's run log, so a client cannot buy a fresh
// allowance by calling run_code again, not even with two calls at once.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "psych/host/bindings.hpp"
#include "psych/host/blob_store.hpp"
#include "psych/host/sandbox.hpp"
#include "psych/result.hpp"
#include "psych/terms.hpp"

namespace psych {

/// The protocol versions psych mcp speaks; a client that asks for another is answered with the
/// newest, as MCP's negotiation has it (the client then decides whether it can go on).
inline constexpr std::string_view mcp_server_versions[] = {"2025-11-25", "2025-06-18"};

/// What every session of one server shares. Not owned: each pointer must outlive the sessions.
struct mcp_server_options {
  sandbox* backend = nullptr;
  /// The deployment's ask of every execution: the isolation minimum, the limits, and the network:
  /// none, or an allowlist of hosts (the deployment's own; a call cannot name hosts). A call's own
  /// `limits` narrow these, never widen them; unrestricted network is never granted.
  code_execution_request ask;
  /// The upstream servers' tools, read at every call (a turn boundary); none: no tools.
  tool_catalogue* catalogue = nullptr;
  tool_invoker* invoker = nullptr;
  /// Where outputs too large for the payload are preserved, for read_tool_output; none: previews only.
  blob_store* blobs = nullptr;
  /// Per execution and per session (the Run's meters).
  binding_budget budget;
  std::string tenant = "default";
  /// run_code calls running at once in one session; one more is refused at once (a refusal the
  /// model reads, `too_many_executions`), never queued.
  std::size_t max_concurrent_per_session = 4;
  /// Empty: each session's run log is in memory (it lives as long as the session can). Otherwise a
  /// file per session in this directory, `<session id>.runlog`, kept for audit.
  std::string run_log_dir;
  std::string server_version;  ///< serverInfo.version
};

/// One outgoing message: the JSON text, and whether the transport may drop it when its client has
/// fallen behind (a progress notification may be dropped; an answer never).
struct mcp_outgoing {
  std::string json;
  bool droppable = false;
};
/// Where a session sends what it says about one message: zero or more progress notifications, then
/// the answer. Called from the caller's thread for an answer made at once, and from the
/// execution's threads for run_code; never two calls at once for one message.
using mcp_send = std::function<void(mcp_outgoing)>;

/// What became of one message handed to receive().
struct mcp_receipt {
  enum class kind {
    answering,  ///< a request: its answer goes to the sink (already, or when its execution ends)
    accepted,   ///< a notification or a response of the client's: nothing is answered
    rejected,   ///< not accepted: `error_json` is a JSON-RPC error with id null, `problem` its words
  };
  kind what = kind::accepted;
  std::string error_json;
  std::string problem;
  /// False when the rejected message was a notification, which JSON-RPC never answers: a transport
  /// tells the client some other way (stdio: a notifications/message; HTTP: the POST's 400).
  bool answerable = true;
};

class mcp_server_session {
 public:
  /// Opens the session's Run: its run log (memory, or the file in run_log_dir).
  static result<std::unique_ptr<mcp_server_session>> open(const mcp_server_options& options, std::string session_id);
  /// Cancels every execution still running and waits for each to end (its process tree gone).
  ~mcp_server_session();
  mcp_server_session(const mcp_server_session&) = delete;
  mcp_server_session& operator=(const mcp_server_session&) = delete;

  /// One message, as one JSON text. A request's answer (and its progress) goes to `send`.
  mcp_receipt receive(std::string_view message, mcp_send send);
  /// Cancels every running execution (their answers are not sent) and waits for them to end.
  void cancel_all();

  [[nodiscard]] const std::string& id() const noexcept;
  /// True once initialize was answered.
  [[nodiscard]] bool initialized() const noexcept;
  /// The protocol version initialize settled on; empty before.
  [[nodiscard]] std::string protocol_version() const;
  /// run_code calls running now.
  [[nodiscard]] std::size_t running() const;

  struct state;

 private:
  explicit mcp_server_session(std::unique_ptr<state> s);
  std::unique_ptr<state> state_;
};

/// Bounds of the stdio transport.
struct mcp_stdio_options {
  /// One message read: a longer line is refused (a JSON-RPC error naming its size) and skipped as
  /// it streams past, never held.
  std::size_t max_message_bytes = std::size_t{16} << 20;
  /// Written but not yet taken by the client: past it, progress notifications are dropped, and
  /// nothing more is read until the client reads its answers (an answer is never dropped).
  std::size_t max_unsent_bytes = std::size_t{8} << 20;
};

/// Serves one session on a pair of descriptors (psych mcp: standard input and output) until the
/// input ends, then cancels what still runs and returns. Fails only when a descriptor cannot be used.
result<void> serve_mcp_stdio(const mcp_server_options& options, int input_fd, int output_fd,
                             const mcp_stdio_options& bounds = {});

}  // namespace psych
