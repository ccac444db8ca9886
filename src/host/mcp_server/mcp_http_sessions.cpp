#include "mcp_server/mcp_http_sessions.hpp"

#include <algorithm>

#include "os/random_hex.hpp"

namespace psych::host {

void http_session::wait_for(const std::string& request_id, const std::shared_ptr<post_reply>& reply) {
  std::erase_if(waiting, [](const auto& entry) { return entry.second.expired(); });
  waiting.emplace_back(request_id, reply);
}

void http_session::abandon(const std::optional<std::string>& request_id) {
  for (auto& [waiting_id, weak] : waiting)
    if (!request_id || waiting_id == *request_id)
      if (auto reply = weak.lock()) reply->abandon();
}

session_reaper::session_reaper()
    : thread_([this] {
        std::unique_lock lock(mutex_);
        for (;;) {
          changed_.wait(lock, [this] { return !queue_.empty() || finishing_; });
          if (queue_.empty()) return;
          auto ending = std::move(queue_.front());
          queue_.pop_front();
          lock.unlock();
          ending.reset();  // cancel_all(), and waits for each execution's end
          lock.lock();
        }
      }) {}

session_reaper::~session_reaper() { finish(); }

void session_reaper::retire(std::unique_ptr<mcp_server_session> session) {
  if (!session) return;
  std::lock_guard lock(mutex_);
  queue_.push_back(std::move(session));
  changed_.notify_one();
}

void session_reaper::finish() {
  {
    std::lock_guard lock(mutex_);
    finishing_ = true;
    changed_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

result<std::shared_ptr<http_session>> session_table::open(const mcp_server_options& options,
                                                          const std::string& client) {
  if (sessions_.size() >= max_) return std::shared_ptr<http_session>{};
  auto entry = std::make_shared<http_session>();
  entry->id = random_hex(16);
  entry->client = client;
  PSYCH_TRY(entry->session, mcp_server_session::open(options, entry->id));
  sessions_.emplace(entry->id, entry);
  return entry;
}

std::shared_ptr<http_session> session_table::find(const std::string& id, const std::string& client) const {
  const auto found = sessions_.find(id);
  if (found == sessions_.end() || found->second->client != client) return nullptr;
  return found->second;
}

void session_table::forget(std::shared_ptr<http_session> entry) {
  sessions_.erase(entry->id);
  entry->abandon(std::nullopt);
  reaper_.retire(std::move(entry->session));
}

std::size_t session_table::forget_idle(mcp_clock::duration expiry) {
  const auto now = mcp_clock::now();
  std::vector<std::shared_ptr<http_session>> idle;
  for (const auto& [session_id, entry] : sessions_)
    if (entry->in_flight == 0 && now - entry->last_used > expiry) idle.push_back(entry);
  for (const auto& entry : idle) forget(entry);
  return idle.size();
}

void session_table::forget_all() {
  while (!sessions_.empty()) forget(sessions_.begin()->second);  // a copy: forget() erases the entry
}

}  // namespace psych::host
