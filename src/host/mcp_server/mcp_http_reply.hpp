#pragma once
// One POST's answer on its way: what the session sends about the POST's request (from the event
// loop for an answer made at once, from an execution's threads for run_code's progress and answer),
// handed to the connection that writes it. The queue is bounded where the messages are made: past
// `bound` unsent bytes a droppable message (progress) is dropped, and a reply that has nowhere to go
// any more (abandoned) keeps nothing, so a client that never reads holds the server to a fixed
// amount of memory. An answer is never dropped while its reply is live.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "psych/host/mcp_server.hpp"

namespace psych::host {

class post_reply : public std::enable_shared_from_this<post_reply> {
 public:
  /// An SSE stream carries every message (progress, then the answer); a single answer (a JSON
  /// body) only the answer, so its progress is dropped as it comes.
  enum class form { event_stream, single_answer };

  /// `loop`: the event loop's executor, where the writer waits. The object must be owned by a
  /// shared_ptr (the session's sends hold it).
  post_reply(boost::asio::any_io_executor loop, form shape, std::size_t bound);

  /// The session's sink for this request's messages; called from any thread.
  void put(mcp_outgoing message);

  struct batch {
    std::deque<std::string> messages;  ///< JSON texts, oldest first
    bool answer = false;               ///< the answer is the last of them
  };
  /// Everything queued, taken whole; its bytes stay counted as unsent until sent().
  batch take();
  /// `bytes` of what take() gave were written (or will never be).
  void sent(std::size_t bytes);

  /// Ends the reply without its answer: its request was cancelled, its session ended, or its
  /// client went away. What is queued is dropped and nothing more is kept. Event loop only.
  void abandon();
  [[nodiscard]] bool abandoned() const;
  /// Waits, on the event loop, until something is queued or the reply is abandoned.
  boost::asio::awaitable<void> wait();

  [[nodiscard]] form shape() const noexcept { return shape_; }
  /// Progress notifications dropped because the stream's client had fallen behind.
  [[nodiscard]] std::uint64_t dropped() const;

 private:
  boost::asio::any_io_executor loop_;
  const form shape_;
  const std::size_t bound_;
  boost::asio::steady_timer wake_;  // the event loop's alone

  mutable std::mutex mutex_;
  std::deque<std::string> queue_;
  std::size_t unsent_ = 0;  ///< queued, and taken but not yet sent
  bool answered_ = false;
  bool abandoned_ = false;
  bool wake_posted_ = false;
  std::uint64_t dropped_ = 0;
};

}  // namespace psych::host
