#pragma once
// Windows only: an error that names the call and the path, and the OVERLAPPED that names an offset
// (for ReadFile and WriteFile on a handle opened for synchronous I/O, and for LockFileEx). The
// store's files read and write with it (store/open_file_windows.cpp).
#include <windows.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "platform/windows/text.hpp"  // error_text
#include "psych/result.hpp"

namespace psych::host::windows_io {

/// system_call_failed: "<call>(<path>): <the system's words>".
inline auto call_failed(std::string_view call, std::string_view path, DWORD error = ::GetLastError()) {
  return fail_with(error_kind::system_call_failed, fmt::format("{}({}): {}", call, path, windows::error_text(error)));
}

inline OVERLAPPED at_offset(std::uint64_t offset) {
  OVERLAPPED where{};
  where.Offset = static_cast<DWORD>(offset & 0xFFFF'FFFFu);
  where.OffsetHigh = static_cast<DWORD>(offset >> 32);
  return where;
}

}  // namespace psych::host::windows_io
