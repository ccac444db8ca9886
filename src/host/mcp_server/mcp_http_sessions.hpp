#pragma once
// The Streamable HTTP server's sessions: each Mcp-Session-Id's MCP session, when it was last used,
// the POSTs of it being answered, and the replies still waiting for an answer (so that a cancel, a
// DELETE or an expiry ends them). The table is the event loop's alone. A session leaves it for the
// reaper, a thread that cancels its executions and waits for them to end, so that the event loop
// never waits on a process tree.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "mcp_server/mcp_http_reply.hpp"
#include "psych/host/mcp_server.hpp"

namespace psych::host {

using mcp_clock = std::chrono::steady_clock;

struct http_session {
  std::string id;
  std::string client;  ///< the name of the credential that opened it: the only one it answers
  /// Null once the session has left the table (it is the reaper's then).
  std::unique_ptr<mcp_server_session> session;
  mcp_clock::time_point last_used = mcp_clock::now();
  std::size_t in_flight = 0;  ///< POSTs being answered
  /// Replies waiting for their answer, by their request's id (JSON text).
  std::vector<std::pair<std::string, std::weak_ptr<post_reply>>> waiting;

  void wait_for(const std::string& request_id, const std::shared_ptr<post_reply>& reply);
  /// Ends the replies waiting for `request_id`'s answer (all of them when nullopt).
  void abandon(const std::optional<std::string>& request_id);
};

/// Cancels and destroys the sessions handed to it, on a thread of its own.
class session_reaper {
 public:
  session_reaper();
  ~session_reaper();  ///< finish()
  session_reaper(const session_reaper&) = delete;
  session_reaper& operator=(const session_reaper&) = delete;

  void retire(std::unique_ptr<mcp_server_session> session);
  /// Returns once every session handed over has ended; none may be handed over after.
  void finish();

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::unique_ptr<mcp_server_session>> queue_;
  bool finishing_ = false;
  std::thread thread_;
};

class session_table {
 public:
  session_table(std::size_t max_sessions, session_reaper& reaper) : max_(max_sessions), reaper_(reaper) {}

  /// A new session of `client` (a credential's name) under a fresh id (128 random bits, hex);
  /// nullptr when max_sessions are open. An error when the session's run log cannot be opened.
  result<std::shared_ptr<http_session>> open(const mcp_server_options& options, const std::string& client);
  /// The session `id` names, if `client` opened it: another credential's is not found, as an id
  /// never made is not, so an id seen by someone else is worth nothing to them.
  std::shared_ptr<http_session> find(const std::string& id, const std::string& client) const;
  /// Takes it out of the table: its waiting replies end, and the reaper cancels its executions.
  void forget(std::shared_ptr<http_session> entry);
  /// Forgets every session unused for `expiry` with nothing being answered; how many.
  std::size_t forget_idle(mcp_clock::duration expiry);
  void forget_all();
  [[nodiscard]] std::size_t size() const noexcept { return sessions_.size(); }

 private:
  std::size_t max_;
  session_reaper& reaper_;
  std::map<std::string, std::shared_ptr<http_session>> sessions_;
};

}  // namespace psych::host
