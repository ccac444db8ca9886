// durable_file.hpp on Windows.
//
// The lock: LockFileEx on one byte at lock_offset, far past any data the file will hold. Windows
// byte-range locks are mandatory, so locking the data itself would block a reader elsewhere (a
// person inspecting the log) where flock on POSIX does not; a byte past the end blocks only another
// opener's lock. A second open of the file, in this process or another, fails the lock at once, and
// Windows releases it when the holder's handle closes or the holder ends, killed included.
//
// Syncs: FlushFileBuffers writes the file's data and its metadata (the size among them) and flushes
// the device's cache; Windows has no cheaper data-only flush through Win32, so sync_data and
// sync are the same call. A directory opened for writing with FILE_FLAG_BACKUP_SEMANTICS is
// flushed the same way, which is how a new file's entry is made durable.
#include "store/durable_file.hpp"

#include <windows.h>

#include <filesystem>

#include <fmt/format.h>

#include "os/file_io_windows.hpp"
#include "platform/windows/text.hpp"  // widen, narrow
#include "os/owner_only_security.hpp"
#include "platform/utf8_path.hpp"

namespace psych::host {
namespace {

constexpr std::uint64_t lock_offset = std::uint64_t{1} << 62;

using windows_io::at_offset;
using windows_io::call_failed;

}  // namespace

result<durable_file> durable_file::open_exclusive(const std::string& path, std::string_view what) {
  PSYCH_TRY(SECURITY_ATTRIBUTES* const owner_only, owner_only_attributes());
  // Shared for reading, writing and deleting, as a POSIX file is: exclusion is the lock's job, so
  // that a second opener learns the log is held rather than meeting a sharing violation.
  windows::unique_handle handle{::CreateFileW(windows::widen(path).c_str(), GENERIC_READ | GENERIC_WRITE,
                                              FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, owner_only,
                                              OPEN_ALWAYS, FILE_ATTRIBUTE_NORMAL, nullptr)};
  if (!handle) return call_failed("CreateFileW", path);
  OVERLAPPED where = at_offset(lock_offset);
  if (!::LockFileEx(handle.get(), LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &where)) {
    const DWORD error = ::GetLastError();
    if (error == ERROR_LOCK_VIOLATION || error == ERROR_IO_PENDING)
      return fail_with(error_kind::system_call_failed,
                     fmt::format("LockFileEx({}): {} is held by another process", path, what));
    return call_failed("LockFileEx", path, error);
  }
  return durable_file{std::move(handle), path};
}

result<void> durable_file::truncate(std::uint64_t size) {
  FILE_END_OF_FILE_INFO end{};
  end.EndOfFile.QuadPart = static_cast<LONGLONG>(size);
  if (!::SetFileInformationByHandle(handle(), FileEndOfFileInfo, &end, sizeof(end)))
    return call_failed("SetFileInformationByHandle(FileEndOfFileInfo)", path());
  return success();
}

result<void> durable_file::sync_data() { return sync(); }

result<void> durable_file::sync_directory() const {
  std::filesystem::path dir = platform::utf8_path(path()).parent_path();
  if (dir.empty()) dir = L".";
  const windows::unique_handle opened{::CreateFileW(dir.c_str(), GENERIC_WRITE,
                                                    FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                                                    OPEN_EXISTING, FILE_FLAG_BACKUP_SEMANTICS, nullptr)};
  const std::string name = windows::narrow(dir.native());
  if (!opened) return call_failed("CreateFileW", name);
  if (!::FlushFileBuffers(opened.get())) return call_failed("FlushFileBuffers", name);
  return success();
}

}  // namespace psych::host
