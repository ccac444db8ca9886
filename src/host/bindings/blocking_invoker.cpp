#include "psych/host/blocking_invoker.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

namespace psych {

struct blocking_invoker::pool {
  explicit pool(std::size_t threads) : threads_(threads) {}
  boost::asio::thread_pool threads_;
};

blocking_invoker::blocking_invoker(permit_function permit, call_function call, std::size_t threads)
    : permit_(std::move(permit)), call_(std::move(call)), pool_(std::make_unique<pool>(threads ? threads : 1)) {}

blocking_invoker::~blocking_invoker() { pool_->threads_.join(); }

void blocking_invoker::invoke(const tool_call& call, std::stop_token stop, std::function<void(tool_outcome)> done) {
  owned_tool_call owned{std::string(call.call_id), std::string(call.execution_id), std::string(call.tool),
                        std::string(call.arguments_json)};
  boost::asio::post(pool_->threads_, [this, owned = std::move(owned), stop = std::move(stop),
                                      done = std::move(done)]() mutable {
    if (stop.stop_requested()) return done(tool_outcome::error(tool_error_kind::cancelled, "stopped before it ran"));
    done(call_(owned, stop));
  });
}

}  // namespace psych
