#pragma once
// A file descriptor closed when its owner goes, whatever path the code takes out.
#include <unistd.h>

#include <utility>

namespace psych::host {

class unique_fd {
 public:
  explicit unique_fd(int fd) noexcept : fd_{fd} {}
  unique_fd(unique_fd&& other) noexcept : fd_{std::exchange(other.fd_, -1)} {}
  unique_fd& operator=(unique_fd&&) = delete;
  ~unique_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const noexcept { return fd_; }
  /// Hands the descriptor to a new owner.
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace psych::host
