#include "mcp_server/mcp_http_reply.hpp"

#include <chrono>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace psych::host {

namespace asio = boost::asio;

post_reply::post_reply(asio::any_io_executor loop, form shape, std::size_t bound)
    : loop_(loop), shape_(shape), bound_(bound), wake_(loop, std::chrono::steady_clock::time_point::max()) {}

void post_reply::put(mcp_outgoing message) {
  std::lock_guard lock(mutex_);
  if (abandoned_ || answered_) return;
  if (message.droppable && shape_ == form::single_answer) return;  // a JSON body has no room for progress
  if (message.droppable && unsent_ + message.json.size() > bound_) {
    ++dropped_;
    return;
  }
  if (!message.droppable) answered_ = true;
  unsent_ += message.json.size();
  queue_.push_back(std::move(message.json));
  // One wake in flight at a time: a burst of messages posts one handler, not one each.
  if (wake_posted_) return;
  wake_posted_ = true;
  asio::post(loop_, [self = shared_from_this()] {
    {
      std::lock_guard relock(self->mutex_);
      self->wake_posted_ = false;
    }
    self->wake_.cancel();
  });
}

post_reply::batch post_reply::take() {
  std::lock_guard lock(mutex_);
  batch out;
  out.messages.swap(queue_);
  out.answer = answered_ && !out.messages.empty();
  return out;
}

void post_reply::sent(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  unsent_ -= std::min(unsent_, bytes);
}

void post_reply::abandon() {
  {
    std::lock_guard lock(mutex_);
    if (abandoned_) return;
    abandoned_ = true;
    queue_.clear();
    unsent_ = 0;
  }
  wake_.cancel();
}

bool post_reply::abandoned() const {
  std::lock_guard lock(mutex_);
  return abandoned_;
}

asio::awaitable<void> post_reply::wait() {
  {
    std::lock_guard lock(mutex_);
    if (!queue_.empty() || abandoned_) co_return;
  }
  // A put() between the check above and this wait posts its wake to the loop, which runs it only
  // after this coroutine is suspended in the wait: the wake is never lost.
  wake_.expires_at(std::chrono::steady_clock::time_point::max());
  co_await wake_.async_wait(asio::as_tuple(asio::use_awaitable));
}

std::uint64_t post_reply::dropped() const {
  std::lock_guard lock(mutex_);
  return dropped_;
}

}  // namespace psych::host
