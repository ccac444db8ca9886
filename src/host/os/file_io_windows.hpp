#pragma once
// Windows only: reads and writes at an offset on a handle opened for synchronous I/O (an OVERLAPPED
// names the offset; the call still waits), whole or to the end of the file, with errors that name
// the call and the path, and its size. What durable_file and store_directory share.
#include <windows.h>

#include <algorithm>
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

/// The file's size now.
inline result<std::uint64_t> size_of(HANDLE file, std::string_view path) {
  LARGE_INTEGER size{};
  if (!::GetFileSizeEx(file, &size)) return call_failed("GetFileSizeEx", path);
  return static_cast<std::uint64_t>(size.QuadPart);
}

/// One ReadFile or WriteFile moves at most this much (a DWORD counts it).
inline constexpr std::size_t max_transfer = std::size_t{1} << 30;

/// Up to `n` bytes at `offset`; fewer only where the file ends.
inline result<std::size_t> read_at(HANDLE file, char* out, std::size_t n, std::uint64_t offset, std::string_view path) {
  std::size_t done = 0;
  while (done < n) {
    OVERLAPPED where = at_offset(offset + done);
    DWORD got = 0;
    if (!::ReadFile(file, out + done, static_cast<DWORD>(std::min(n - done, max_transfer)), &got, &where)) {
      const DWORD error = ::GetLastError();
      if (error == ERROR_HANDLE_EOF) break;  // an offset at or past the end
      return call_failed("ReadFile", path, error);
    }
    if (got == 0) break;
    done += got;
  }
  return done;
}

/// All of `bytes` at `offset`, growing the file as needed.
inline result<void> write_at(HANDLE file, std::string_view bytes, std::uint64_t offset, std::string_view path) {
  while (!bytes.empty()) {
    OVERLAPPED where = at_offset(offset);
    DWORD put = 0;
    if (!::WriteFile(file, bytes.data(), static_cast<DWORD>(std::min(bytes.size(), max_transfer)), &put, &where))
      return call_failed("WriteFile", path);
    bytes.remove_prefix(put);
    offset += put;
  }
  return success();
}

}  // namespace psych::host::windows_io
