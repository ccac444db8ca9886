#include "execution/live_output_relay.hpp"

#include <cstddef>
#include <utility>

namespace psych::host {

namespace {
std::size_t index_of(output_stream stream) { return static_cast<std::size_t>(stream); }
}  // namespace

live_output_relay::live_output_relay(output_sink& sink, std::uint64_t window_bytes)
    : sink_(sink), window_(window_bytes), thread_([this] { deliver_all(); }) {}

live_output_relay::~live_output_relay() {
  if (!finished_) finish(pushed_end_[0], pushed_end_[1]);
}

void live_output_relay::push(output_stream stream, std::uint64_t offset, std::string_view data) {
  if (data.empty()) return;
  {
    std::lock_guard lock(mutex_);
    pushed_end_[index_of(stream)] = offset + data.size();
    if (finishing_ || held_ + data.size() > window_) {
      dropped_ += data.size();
      return;
    }
    held_ += data.size();
    queue_.push_back({stream, offset, std::string(data)});
  }
  changed_.notify_one();
}

void live_output_relay::finish(std::uint64_t stdout_size, std::uint64_t stderr_size) {
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    finished_ = finishing_ = true;
    final_size_ = {stdout_size, stderr_size};
  }
  changed_.notify_one();
  thread_.join();
}

std::uint64_t live_output_relay::dropped_bytes() const {
  std::lock_guard lock(mutex_);
  return dropped_;
}

void live_output_relay::deliver(output_stream stream, std::uint64_t offset, std::string_view data) {
  auto& shown = shown_end_[index_of(stream)];
  // A chunk never goes back: what the sink was shown stays shown (offsets only grow per stream).
  const std::uint64_t skipped = offset > shown ? offset - shown : 0;
  shown = offset + data.size();
  if (sink_failed_) return;
  try {
    sink_.on_output({.stream = stream, .offset = offset, .data = data, .skipped = skipped});
  } catch (...) {
    // The caller's sink is not the program's: its exception must not end the execution (it runs
    // on, and its result is whole), so this sink is shown nothing more.
    sink_failed_ = true;
  }
}

void live_output_relay::deliver_all() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return !queue_.empty() || finishing_; });
    if (queue_.empty()) break;
    queued next = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    deliver(next.stream, next.offset, next.data);
    lock.lock();
    held_ -= next.data.size();
  }
  const auto sizes = final_size_;
  lock.unlock();
  for (const auto stream : {output_stream::stdout_stream, output_stream::stderr_stream})
    if (sizes[index_of(stream)] > shown_end_[index_of(stream)]) deliver(stream, sizes[index_of(stream)], {});
}

}  // namespace psych::host
