// interrupt.hpp on Windows: a console control handler, which Windows calls on a thread of its own.
// Ctrl+C and Ctrl+Break ask the execution to stop and are handled. Closing the console, logging off
// and shutting down are left to the default, which ends psych; the launcher, finding its host gone
// (its control connection closed), ends the program's job (docs/windows-launcher.md). The launcher
// has no console, so ^C reaches psych alone.
#include "interrupt.hpp"

#include <windows.h>

#include <mutex>

namespace psych::cli {
namespace {

/// The live canceller's source; a handler has no argument to carry it. The mutex keeps a handler
/// that is running from reaching a canceller being destroyed.
std::mutex live_mutex;
std::stop_source* live_source = nullptr;

BOOL WINAPI on_console_control(DWORD event) {
  if (event != CTRL_C_EVENT && event != CTRL_BREAK_EVENT) return FALSE;
  const std::lock_guard lock(live_mutex);
  if (live_source) live_source->request_stop();
  return TRUE;
}

}  // namespace

interrupt_canceller::interrupt_canceller() {
  {
    const std::lock_guard lock(live_mutex);
    live_source = &source_;
  }
  // A process started with Ctrl+C ignored (CREATE_NEW_PROCESS_GROUP) inherits that: turn it back
  // on, as the POSIX half restores SIGINT's default, so that ^C reaches the handler.
  ::SetConsoleCtrlHandler(nullptr, FALSE);
  ::SetConsoleCtrlHandler(on_console_control, TRUE);
}

interrupt_canceller::~interrupt_canceller() {
  ::SetConsoleCtrlHandler(on_console_control, FALSE);
  const std::lock_guard lock(live_mutex);
  live_source = nullptr;
}

}  // namespace psych::cli
