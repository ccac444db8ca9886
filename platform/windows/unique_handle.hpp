#pragma once
// One HANDLE, closed with the object that owns it: the launcher's, and psych's host's on Windows
// (src/host/os/os_handle.hpp).
#include <windows.h>

#include "platform/windows/unique_resource.hpp"

namespace psych::windows {

struct handle_traits {
  using type = HANDLE;
  static constexpr HANDLE empty = nullptr;
  /// Win32 calls fail with either nullptr or INVALID_HANDLE_VALUE, depending on the call.
  static bool valid(HANDLE handle) noexcept { return handle != nullptr && handle != INVALID_HANDLE_VALUE; }
  static void release(HANDLE handle) noexcept { ::CloseHandle(handle); }
};

using unique_handle = unique_resource<handle_traits>;

}  // namespace psych::windows
