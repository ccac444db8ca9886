#pragma once
// How an MCP session reaches its server: a child's stdin and stdout (mcp_client.cpp) or Streamable
// HTTP (mcp_http_client.cpp, in psych::remote). The session (mcp_client) holds what MCP means, the
// handshake, the paged tool list, a call's result; a transport only carries JSON-RPC requests and
// notifications, answers the server's pings, and notes that its tool list changed.
#include <sys/types.h>  // pid_t

#include <atomic>
#include <chrono>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "psych/host/mcp.hpp"

namespace psych::host {

class mcp_transport {
 public:
  /// Ends the session with the server (stops a child, or DELETEs an HTTP session) and returns.
  virtual ~mcp_transport() = default;

  /// Sends a request and waits for its answer: the raw `result` text. Past `timeout` or at `stop`
  /// it is abandoned, followed by notifications/cancelled when `cancellable`; it is never sent twice.
  virtual mcp_result<std::string> request(std::string_view method, std::string params_json,
                                          std::chrono::milliseconds timeout, std::stop_token stop,
                                          bool cancellable = true) = 0;
  /// Sends a notification, best effort.
  virtual void notify(std::string_view method, std::string params_json) = 0;

  /// initialize was answered with this protocol version (HTTP sends it with every later request).
  virtual void session_began(std::string_view protocol_version) { (void)protocol_version; }
  /// True when the server lost the session and the next request must initialize again.
  [[nodiscard]] virtual bool session_lost() const { return false; }

  /// Why the transport can carry nothing more; nullopt while it can.
  [[nodiscard]] virtual std::optional<mcp_error> broken() const = 0;
  /// The server's process, 0 when it is none of ours.
  [[nodiscard]] virtual pid_t pid() const noexcept { return 0; }

  /// True when the server said its tool list changed since the last call (or it never was called).
  bool take_tools_changed() noexcept { return tools_changed_.exchange(false); }

 protected:
  mcp_transport() = default;
  mcp_transport(const mcp_transport&) = delete;
  mcp_transport& operator=(const mcp_transport&) = delete;

  /// A notification of the server's: only a changed tool list matters to psych.
  void server_notified(std::string_view method) noexcept {
    if (method == "notifications/tools/list_changed") tools_changed_ = true;
  }
  /// A session that began again lists its tools again.
  void tools_may_have_changed() noexcept { tools_changed_ = true; }

  /// The answer to a request of the server's: this client offers no roots, sampling or
  /// elicitation, so only ping is answered ("{}"); nullopt is "method not found".
  static std::optional<std::string> answer_server_request(std::string_view method) {
    if (method == "ping") return std::string{"{}"};
    return std::nullopt;
  }

 private:
  std::atomic<bool> tools_changed_{true};
};

}  // namespace psych::host
