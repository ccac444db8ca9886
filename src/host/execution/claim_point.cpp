// A prepared session and the request that claims it meet here (session.hpp): the pool's side
// blocks, the session's side wakes its own event loop.
#include "execution/session.hpp"

namespace psych::host {

bool claim_point::wait_ready() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return state_ != state::preparing; });
  return state_ == state::ready;
}

bool claim_point::claim(const session_plan& request) {
  std::unique_lock lock(mutex_);
  if (state_ != state::ready) return false;
  state_ = state::claimed;
  request_ = &request;
  auto wake = std::move(wake_);
  lock.unlock();
  wake();
  return true;
}

void claim_point::retire() {
  std::unique_lock lock(mutex_);
  const bool waiting = state_ == state::ready;
  if (state_ == state::preparing || waiting) state_ = state::retired;
  auto wake = waiting ? std::move(wake_) : std::function<void()>{};
  lock.unlock();
  if (wake) wake();
}

bool claim_point::waiting() const {
  std::lock_guard lock(mutex_);
  return state_ == state::ready;
}

std::string claim_point::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

void claim_point::ready(std::function<void()> wake) {
  std::unique_lock lock(mutex_);
  if (state_ != state::preparing) {  // retired while it was being prepared: end at once
    lock.unlock();
    wake();
    return;
  }
  state_ = state::ready;
  wake_ = std::move(wake);
  changed_.notify_all();
}

const session_plan* claim_point::take() {
  std::lock_guard lock(mutex_);
  if (state_ == state::claimed) return request_;
  state_ = state::retired;
  wake_ = nullptr;
  return nullptr;
}

void claim_point::ended(std::string why) {
  std::lock_guard lock(mutex_);
  if (state_ == state::preparing) failure_ = why.empty() ? "the prepared sandbox ended before it was ready" : std::move(why);
  if (state_ != state::claimed) state_ = state::ended;
  wake_ = nullptr;
  changed_.notify_all();
}

}  // namespace psych::host
