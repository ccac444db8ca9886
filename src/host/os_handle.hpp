#pragma once
// What the operating system hands the host for a pipe end or a process: a descriptor on POSIX, a
// HANDLE on Windows. The code that spawns processes and reads their output names this type, so
// it is written once for both; what only one kind of system has (Unix sockets, pidfds, signals)
// stays in code that builds only there.
#ifdef _WIN32
#include <utility>
#else
#include "posix.hpp"
#endif

#include "psych/result.hpp"

namespace psych::host {

#ifdef _WIN32
/// A HANDLE (void*), without <windows.h> in every file that names one.
using os_handle = void*;
inline constexpr os_handle no_os_handle = nullptr;

/// One HANDLE, closed when its owner goes.
class unique_os_handle {
 public:
  unique_os_handle() noexcept = default;
  explicit unique_os_handle(os_handle handle) noexcept : handle_{handle} {}
  unique_os_handle(unique_os_handle&& other) noexcept : handle_{std::exchange(other.handle_, no_os_handle)} {}
  unique_os_handle& operator=(unique_os_handle&& other) noexcept {
    if (this != &other) reset(std::exchange(other.handle_, no_os_handle));
    return *this;
  }
  unique_os_handle(const unique_os_handle&) = delete;
  unique_os_handle& operator=(const unique_os_handle&) = delete;
  ~unique_os_handle() { reset(); }

  [[nodiscard]] os_handle get() const noexcept { return handle_; }
  [[nodiscard]] bool valid() const noexcept { return handle_ != no_os_handle; }
  [[nodiscard]] os_handle release() noexcept { return std::exchange(handle_, no_os_handle); }
  void reset(os_handle handle = no_os_handle) noexcept;

 private:
  os_handle handle_ = no_os_handle;
};

/// Two ends of a pipe, each owned.
struct os_handle_pair {
  unique_os_handle first;   ///< the read end
  unique_os_handle second;  ///< the write end
};
#else
using os_handle = int;
inline constexpr os_handle no_os_handle = -1;
using unique_os_handle = unique_fd;
using os_handle_pair = fd_pair;
#endif

/// A pipe for a child's output: the read end for the host's event loop (Asio's stream
/// descriptor; on Windows an overlapped named pipe, since Asio cannot wait on an anonymous one),
/// the write end for the child to be given. Neither is inherited by any child it is not given to
/// (close-on-exec; on Windows not inheritable, and children get explicit handle lists).
result<os_handle_pair> output_pipe();

#ifndef _WIN32
inline result<os_handle_pair> output_pipe() { return cloexec_pipe(); }
#endif

}  // namespace psych::host
