#pragma once
// MCP servers as binding sources: a client of one MCP server over the stdio transport
// (newline-delimited JSON-RPC 2.0 on the server's stdin and stdout) or over Streamable HTTP
// (mcp_http_client.hpp, in psych::remote), and a binding source that offers every tool of several
// servers as `server__tool`.
//
// The header is light: RapidJSON, the pipes and the threads live in src/host (child_process,
// json_rpc_peer, mcp_transport, mcp_client, mcp_binding_source).
#include <sys/types.h>  // pid_t

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include <boost/outcome/basic_result.hpp>
#include <boost/outcome/policy/terminate.hpp>

#include "psych/host/bindings.hpp"
#include "psych/host/secret_resolver.hpp"
#include "psych/names.hpp"

namespace psych {

namespace host {
class mcp_transport;  ///< how a session reaches its server (src/host/mcp/mcp_transport.hpp)
}

/// Why an MCP request produced no answer. Each kind carries the rule of when it is used.
enum class mcp_error_kind {
  /// The configuration cannot be used: an empty command, an empty or duplicate server name, a server
  /// name containing "__", a timeout that is not positive. Nothing was started.
  invalid_config,
  /// The server could not be started (a pipe, posix_spawn, pidfd_open, eventfd failed); the detail
  /// names the call and errno.
  spawn_failed,
  /// The server closed its output or exited while this request waited; the detail has its exit
  /// status and the tail of its stderr. The client is unusable afterwards.
  server_exited,
  /// The server broke the protocol: it wrote a line that is not JSON-RPC or is over the 16 MiB
  /// bound, stopped reading its stdin in the middle of a message past that message's time limit,
  /// or sent requests (pings) without reading the answers until over 4 MiB of them waited. The
  /// client is unusable afterwards. A result of the wrong shape, or a tool list past the paging bounds, is this kind
  /// too but spoils only that request.
  protocol_violation,
  /// The client stopped working before this request (a server_exited or protocol_violation
  /// earlier, or a request that could not be written whole); nothing was sent. Start a new one.
  unusable,
  /// The server answered with a JSON-RPC error; `rpc_code` is its code, the detail its message.
  rpc_error,
  /// The tool ran and reported an error of its own (`isError: true`); the detail is its text.
  tool_failed,
  /// No answer within the request's time limit. The request was abandoned (a
  /// notifications/cancelled was sent, a late answer is dropped) and the client stays usable.
  timeout,
  /// The caller's stop token was requested before the answer came; abandoned as for a timeout.
  cancelled,
  /// The arguments of a tool call are not one JSON object. Nothing was sent.
  invalid_arguments,

  // Over Streamable HTTP only (mcp_http_client.hpp). Each spoils only its request: the client
  // stays usable.

  /// The server could not be reached (resolving, connecting, TLS). Nothing was sent.
  unreachable,
  /// The connection failed after the request may have reached the server (or the answer's stream
  /// ended before the answer): whether it was acted on is unknown.
  connection_lost,
  /// The server answered with a redirect, which a POST never follows (it would send the request
  /// twice), or the request would have left the server's origin.
  refused,
  /// The server answered 401 or 403: it refuses the credential. Its body is never quoted.
  unauthorized,
  /// The credential could not be resolved (the token command failed). Nothing was sent.
  no_credential,
  /// The server answered 404 to the session's id: the session is gone. The request is not sent
  /// again; the next one starts a new session (initialize again).
  session_expired,
  /// The server answered another HTTP status (5xx, an unexpected 4xx); `rpc_code` is the status.
  http_error,
};
PSYCH_ENUM_NAMES(mcp_error_kind, "invalid_config", "spawn_failed", "server_exited", "protocol_violation",
                 "unusable", "rpc_error", "tool_failed", "timeout", "cancelled", "invalid_arguments", "unreachable",
                 "connection_lost", "refused", "unauthorized", "no_credential", "session_expired", "http_error");

struct mcp_error {
  mcp_error_kind kind;
  std::string detail;
  std::int64_t rpc_code = 0;  ///< the JSON-RPC error code, for rpc_error; the HTTP status, for http_error

  /// "kind: detail", the form every psych message takes.
  [[nodiscard]] std::string message() const {
    std::string text{name_of(kind)};
    if (!detail.empty()) text.append(": ").append(detail);
    return text;
  }
};

/// psych::result's policy (a wrong access traps) with the MCP error: the MCP kinds are the
/// client's own, not psych's error_kind.
template <class T>
using mcp_result = boost::outcome_v2::basic_result<T, mcp_error, boost::outcome_v2::policy::terminate>;

/// How to start one MCP server, or reach one: a `command` (stdio, mcp_client::start) or a `url`
/// (Streamable HTTP, start_mcp_http_client in mcp_http_client.hpp), never both.
struct mcp_server_config {
  /// The server's name: the prefix of its bindings (`name__tool`). Must not contain "__".
  std::string name;
  /// The program and its arguments; a program without a slash is looked up on the host's PATH.
  std::vector<std::string> command;
  /// A Streamable HTTP endpoint, e.g. https://tools.example/mcp. https unless the host is loopback
  /// or allow_insecure_http is set.
  std::string url;
  /// Over HTTP: the bearer token (`Authorization: Bearer ...`), resolved fresh for every request.
  /// Unset: no Authorization header.
  secret_resolver token;
  /// Over https: a PEM file of the CA the server's certificate must chain to (default: the system's).
  std::optional<std::string> ca_file;
  /// Over HTTP: allow http:// to a host that is not loopback (only on a network that is trusted).
  bool allow_insecure_http = false;
  /// Added to the few variables a server inherits from the host (HOME, LOGNAME, PATH, SHELL, TERM,
  /// USER, LANG, as the MCP SDKs do): the host's secrets are not handed to a server unasked.
  std::map<std::string, std::string> environment;
  /// Per request: each page of tools/list, each tools/call; and initialize unless start_timeout is set.
  std::chrono::milliseconds timeout{30000};
  /// The protocol version asked for in `initialize`: "2025-06-18" or "2025-11-25" (invalid_config
  /// otherwise). The server may answer another; the client takes what it answers.
  std::string protocol_version = "2025-06-18";
  /// The start-up budget: mcp_client::start() returns within it (the spawn and the initialize
  /// handshake), whatever the server does, plus the stop of a server that did not answer
  /// (~mcp_client, at most 2 s). Unset: `timeout`.
  std::optional<std::chrono::milliseconds> start_timeout;
};

/// One tool, as the server lists it.
struct mcp_tool {
  std::string name;
  std::string description;
  std::string input_schema_json = "{}";  ///< the tool's inputSchema, one JSON value
  /// The server marks it destructive (annotations: destructiveHint true, readOnlyHint not true). A
  /// tool without annotations is not: docs/bindings.md says why.
  bool destructive = false;
};

/// What a tools/call answered, when it was not an error.
struct mcp_call_result {
  /// The raw `result` object: {"content":[...], "structuredContent":..., ...}.
  std::string json;
};

/// One running MCP server and the JSON-RPC session with it.
///
/// Thread safety: every member may be called from several threads at once. Requests are
/// multiplexed by id over the one pipe, with two threads of the client's own. The reader only
/// reads: it hands each answer to the request that waits for it, drains the server's stderr into
/// a bounded tail, and answers the server's own requests (`ping`; anything else is "method not
/// found") by queueing the answer. The writer writes the queue in order. So a server that stops
/// reading its stdin never stops the client reading its stdout: a request still queued at its time
/// limit is withdrawn (a timeout, the client stays usable).
class mcp_client {
 public:
  /// Spawns the command in its own process group (stdin and stdout on pipes, stderr kept as a
  /// bounded tail, every other descriptor closed), then `initialize` (accepting whatever protocol
  /// version the server answers) and `notifications/initialized`. A configuration with a `url` is
  /// invalid_config here: an MCP server over HTTP is started with start_mcp_http_client.
  static mcp_result<std::unique_ptr<mcp_client>> start(const mcp_server_config& config);

  /// The session (the handshake, then the requests) over a transport already set up: for the
  /// transports of psych's own (start_mcp_http_client); the type is internal to psych.
  static mcp_result<std::unique_ptr<mcp_client>> over(const mcp_server_config& config,
                                                      std::unique_ptr<host::mcp_transport> transport);

  /// Closes the server's stdin and waits 1 s for it to exit, then SIGTERM to its process group, 1 s,
  /// SIGKILL, and reaps it. Only the process it started (by pid, before it is reaped) and its
  /// process group are signalled. No request may still be running (the binding source joins its
  /// pool first).
  ~mcp_client();
  mcp_client(const mcp_client&) = delete;
  mcp_client& operator=(const mcp_client&) = delete;

  /// Every tool, following `nextCursor`: at most 100 pages and 10,000 tools (protocol_violation past either).
  mcp_result<std::vector<mcp_tool>> list_tools();

  /// Calls one tool. `arguments_json` must be one JSON object. `isError: true` is tool_failed, a
  /// JSON-RPC error is rpc_error. A requested `stop` abandons the call (cancelled).
  mcp_result<mcp_call_result> call_tool(std::string_view name, std::string_view arguments_json, std::stop_token stop);
  /// The same, with a time limit of its own instead of the configuration's.
  mcp_result<mcp_call_result> call_tool(std::string_view name, std::string_view arguments_json, std::stop_token stop,
                                        std::chrono::milliseconds timeout);

  [[nodiscard]] const std::string& name() const noexcept;
  /// The protocol version the server answered in `initialize`.
  [[nodiscard]] const std::string& protocol_version() const noexcept;
  /// The server's process id (its process group has the same id). Gone after destruction. 0 for a
  /// server over HTTP: it is no process of ours.
  [[nodiscard]] pid_t pid() const noexcept;
  /// False once the client is unusable (the server exited or wrote something that is not MCP). A
  /// client over HTTP stays usable: each request is an exchange of its own.
  [[nodiscard]] bool usable() const;
  /// True when the server said its tool list changed (notifications/tools/list_changed) since the
  /// last call of this function, or when it was never called.
  bool take_tools_changed() noexcept;

 private:
  struct state;  ///< the session's internals, in mcp_client.cpp
  explicit mcp_client(std::unique_ptr<state> s);
  std::unique_ptr<state> state_;
};

/// Several MCP servers as one catalogue and invoker: each server's tool `t` is the binding
/// `server__t`. The tool lists are read at the first offered_now() and again after a server says
/// they changed; a server that is unusable or cannot list now offers nothing (a failed listing is
/// tried again at the next read). Calls run on a small pool of threads of its own
/// (blocking_invoker); the pool is joined before the clients are destroyed.
///
/// Outcomes: the raw `result` object, or tool_failed (`isError`, a JSON-RPC error), timeout,
/// cancelled, unknown_tool (no server of that name), malformed_call (arguments not an object),
/// unavailable_binding (the server was unusable before the call was sent, or over HTTP: could not
/// be reached, refused the credential, redirected, lost the session), unknown_outcome (the server
/// exited or broke the protocol with the call in flight, or over HTTP the connection failed after
/// the call was sent or the server answered an HTTP error: it may or may not have happened). A
/// tools/call is never sent twice.
class mcp_binding_source final : public tool_catalogue, public tool_invoker {
 public:
  /// invalid_config for a server name that is empty, contains "__", or is used twice.
  static mcp_result<std::unique_ptr<mcp_binding_source>> create(std::vector<std::unique_ptr<mcp_client>> clients,
                                                                std::size_t threads = 4);
  ~mcp_binding_source() override;

  std::vector<binding> offered_now() override;
  /// A tool its server marks destructive needs a person's approval, so a program is refused it
  /// (approval_required_in_program); every other tool is allowed.
  call_permission permit(const tool_call& call) override;
  void invoke(const tool_call& call, std::stop_token stop, std::function<void(tool_outcome)> done) override;

  /// The server and the tool a binding name stands for: split at the first "__", the part before
  /// it naming a known server. Null when no server has that name.
  struct target {
    mcp_client* client;
    std::string tool;
  };
  [[nodiscard]] std::optional<target> resolve(std::string_view binding_name) const;

 private:
  struct impl;
  explicit mcp_binding_source(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

}  // namespace psych
