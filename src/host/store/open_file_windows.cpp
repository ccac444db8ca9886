// open_file.hpp on Windows.
#include "store/open_file.hpp"

#include <windows.h>

#include <algorithm>

#include "os/file_io_windows.hpp"

namespace psych::host {
namespace {

using windows_io::at_offset;
using windows_io::call_failed;

/// One ReadFile or WriteFile moves at most this much (a DWORD counts it).
constexpr std::size_t max_transfer = std::size_t{1} << 30;

}  // namespace

result<std::uint64_t> open_file::size() const {
  LARGE_INTEGER size{};
  if (!::GetFileSizeEx(handle_.get(), &size)) return call_failed("GetFileSizeEx", path_);
  return static_cast<std::uint64_t>(size.QuadPart);
}

result<std::size_t> open_file::read_at(char* out, std::size_t n, std::uint64_t offset) const {
  std::size_t done = 0;
  while (done < n) {
    OVERLAPPED where = at_offset(offset + done);
    DWORD got = 0;
    if (!::ReadFile(handle_.get(), out + done, static_cast<DWORD>(std::min(n - done, max_transfer)), &got, &where)) {
      const DWORD error = ::GetLastError();
      if (error == ERROR_HANDLE_EOF) break;  // an offset at or past the end
      return call_failed("ReadFile", path_, error);
    }
    if (got == 0) break;
    done += got;
  }
  return done;
}

result<void> open_file::write_at(std::string_view bytes, std::uint64_t offset) {
  while (!bytes.empty()) {
    OVERLAPPED where = at_offset(offset);
    DWORD put = 0;
    if (!::WriteFile(handle_.get(), bytes.data(), static_cast<DWORD>(std::min(bytes.size(), max_transfer)), &put, &where))
      return call_failed("WriteFile", path_);
    bytes.remove_prefix(put);
    offset += put;
  }
  return success();
}

result<void> open_file::sync() {
  if (!::FlushFileBuffers(handle_.get())) return call_failed("FlushFileBuffers", path_);
  return success();
}

}  // namespace psych::host
