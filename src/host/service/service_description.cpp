#include "service/service_description.hpp"

#include <chrono>
#include <utility>

#include <boost/asio/post.hpp>

#include "http/http_link.hpp"
#include "psych/host/result_json.hpp"

namespace psych::host {

void service_description::refresh() {
  description d = backend_.describe();
  std::string json = protocol::encode_json(d);
  std::lock_guard lock(mutex_);
  described_ = std::move(d);
  json_ = std::move(json);
}

description service_description::current() const {
  std::lock_guard lock(mutex_);
  return described_;
}

std::string service_description::json() const {
  std::lock_guard lock(mutex_);
  return json_;
}

awaitable<void> service_description::probe_now() {
  auto waiter = std::make_shared<asio::steady_timer>(io_, std::chrono::steady_clock::time_point::max());
  probe_waiters_.push_back(waiter);
  if (!probing_) {
    probing_ = true;
    if (prober_.joinable()) prober_.join();  // it posted its end already
    prober_ = std::thread([this] {
      refresh();
      asio::post(io_, [this] {
        probing_ = false;
        for (auto& w : probe_waiters_) w->cancel();
        probe_waiters_.clear();
      });
    });
  }
  co_await waiter->async_wait(use_tuple);
}

void service_description::start_refreshing(double seconds) {
  refresher_ = std::jthread([this, seconds](std::stop_token stop) {
    for (;;) {
      {
        std::unique_lock lock(refresh_mutex_);
        if (seconds <= 0) {
          refresh_wake_.wait(lock, stop, [] { return false; });
          return;
        }
        if (refresh_wake_.wait_for(lock, stop, millis(seconds), [] { return false; }) || stop.stop_requested())
          return;
      }
      refresh();
    }
  });
}

void service_description::stop_refreshing() {
  refresher_.request_stop();
  refresh_wake_.notify_all();
  if (refresher_.joinable()) refresher_.join();
}

void service_description::join_probe() {
  if (prober_.joinable()) prober_.join();
}

}  // namespace psych::host
