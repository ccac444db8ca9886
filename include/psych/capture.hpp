#pragma once
// Bounded capture of one output stream: keeps at most max_bytes, counts
// everything. A program that prints a gigabyte costs max_bytes and a counter.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

namespace psych {

class stream_capture {
 public:
  explicit stream_capture(std::uint64_t max_bytes) : max_bytes_(max_bytes) {}

  void append(std::string_view bytes) {
    produced_ += bytes.size();
    const auto room = max_bytes_ - std::min<std::uint64_t>(max_bytes_, data_.size());
    data_.append(bytes.substr(0, static_cast<std::size_t>(std::min<std::uint64_t>(room, bytes.size()))));
  }

  [[nodiscard]] const std::string& data() const noexcept { return data_; }
  [[nodiscard]] std::string take() noexcept { return std::move(data_); }
  [[nodiscard]] std::uint64_t produced() const noexcept { return produced_; }
  [[nodiscard]] bool truncated() const noexcept { return produced_ > data_.size(); }

 private:
  std::uint64_t max_bytes_;
  std::uint64_t produced_ = 0;
  std::string data_;
};

}  // namespace psych
