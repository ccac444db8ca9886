#pragma once
// The bootstrap reaches the child as a read-only descriptor on fd 4
// (bootstrap_loader.py reads it, closes it, and runs what it holds), not as a
// `-c` source the interpreter would compile on every start. Nothing that shares
// the file description, the program included, may change what a later reader
// sees: on Linux a sealed memfd (linux/bootstrap_memfd.cpp), on macOS an
// unlinked file opened read-only once the launcher wrote it (macos/bootstrap_file.cpp).
#include <span>

#include "setup_error.hpp"

namespace psych::launcher {

/// Owns the descriptor; closing it in the launcher after the fork leaves the child's copy alone.
class bootstrap_fd {
 public:
  explicit bootstrap_fd(int fd) noexcept : fd_(fd) {}
  bootstrap_fd(bootstrap_fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  bootstrap_fd& operator=(bootstrap_fd&&) = delete;
  bootstrap_fd(const bootstrap_fd&) = delete;
  bootstrap_fd& operator=(const bootstrap_fd&) = delete;
  ~bootstrap_fd();
  [[nodiscard]] int get() const noexcept { return fd_; }

 private:
  int fd_ = -1;
};

/// A close-on-exec descriptor holding `blob` at offset 0 that nobody can write through any more.
/// Before the fork: the child only dup2()s it to fd 4. Defined per OS (see above).
setup_result<bootstrap_fd> seal_bootstrap(std::span<const unsigned char> blob);

}  // namespace psych::launcher
