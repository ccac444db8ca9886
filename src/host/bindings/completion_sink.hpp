#pragma once
// A place to hand work to an event loop from any thread, which may close before the work arrives:
// an invoker that completes after its execution ended, a relay's answer after the program is done.
#include <mutex>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

namespace psych::host {

/// Where an invoker's completion lands, from whatever thread it calls back on. It outlives the
/// dispatcher, so a tool finishing after the execution ended finds it closed and nothing else.
class completion_sink {
 public:
  explicit completion_sink(boost::asio::io_context& io) : io_(&io) {}
  template <class Handler>
  void post(Handler handler) {
    std::lock_guard lock(mutex_);
    if (io_) boost::asio::post(*io_, std::move(handler));
  }
  void close() {
    std::lock_guard lock(mutex_);
    io_ = nullptr;
  }

 private:
  std::mutex mutex_;
  boost::asio::io_context* io_;
};

}  // namespace psych::host
