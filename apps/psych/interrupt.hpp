#pragma once
// ^C (and on POSIX SIGTERM and SIGHUP, on Windows Ctrl+Break) cancels the execution: the tree is
// killed and the result still printed, instead of psych dying and orphaning the sandbox. One half
// per system: interrupt_posix.cpp, interrupt_windows.cpp.
#include <stop_token>
#include <thread>

namespace psych::cli {

/// While it lives, an interrupt asks its token to stop. One at a time per process.
class interrupt_canceller {
 public:
  interrupt_canceller();
  ~interrupt_canceller();
  interrupt_canceller(const interrupt_canceller&) = delete;
  interrupt_canceller& operator=(const interrupt_canceller&) = delete;
  std::stop_token token() const { return source_.get_token(); }

 private:
  std::stop_source source_;
  std::thread waiter_;  ///< POSIX: the one thread that takes the signals; Windows: unused
};

}  // namespace psych::cli
