// store_directory.hpp on Windows. Entries are opened beneath their directory's handle, as
// themselves (open_beneath_windows.hpp); a temporary file is renamed onto its blob's name through
// its own handle, relative to the directory's (FileRenameInformation with a RootDirectory), and a file is
// deleted through a handle of its own with POSIX semantics where the file system has them (its name
// goes at once, while readers keep what they opened), else Windows' own (the name goes with the
// last handle). Directories and files are made with owner_only_attributes().
#include "store/store_directory.hpp"

#include <windows.h>
#include <winternl.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "os/file_io_windows.hpp"
#include "platform/windows/text.hpp"  // widen, narrow
#include "os/open_beneath_windows.hpp"
#include "os/owner_only_security.hpp"
#include "platform/utf8_path.hpp"

namespace psych::host {
namespace {

using windows_io::call_failed;

/// Listing, adding entries, reading attributes, and FlushFileBuffers (which needs write access).
constexpr ACCESS_MASK directory_access =
    FILE_LIST_DIRECTORY | FILE_ADD_FILE | FILE_ADD_SUBDIRECTORY | FILE_TRAVERSE | FILE_READ_ATTRIBUTES;

auto not_ours(std::string_view path, std::string_view why) {
  return fail_with(error_kind::blob_store_failed, fmt::format("{}: {}", path, why));
}

// FileDispositionInfoEx (Windows 10 1607), which mingw-w64's minwinbase.h declares only for a
// _WIN32_WINNT no version has (it compares with an NTDDI value); its number in the enumeration.
constexpr auto file_disposition_info_ex = static_cast<FILE_INFO_BY_HANDLE_CLASS>(21);

bool absent(DWORD error) { return error == ERROR_FILE_NOT_FOUND || error == ERROR_PATH_NOT_FOUND; }

bool taken(DWORD error) { return error == ERROR_ALREADY_EXISTS || error == ERROR_FILE_EXISTS; }

std::string joined(const std::string& dir, const std::string& name) { return fmt::format("{}\\{}", dir, name); }

std::chrono::system_clock::time_point time_of(FILETIME when) {
  // 100 ns ticks since 1601-01-01; the Unix epoch is 11644473600 s later.
  const std::uint64_t ticks = (std::uint64_t{when.dwHighDateTime} << 32) | when.dwLowDateTime;
  const auto since_1601 = std::chrono::duration<std::int64_t, std::ratio<1, 10'000'000>>{static_cast<std::int64_t>(ticks)};
  return std::chrono::system_clock::time_point{
      std::chrono::duration_cast<std::chrono::system_clock::duration>(since_1601 - std::chrono::seconds{11'644'473'600})};
}

}  // namespace

result<void> store_file::append(std::string_view bytes) {
  PSYCH_TRY(const std::uint64_t end, size());
  return write_at(bytes, end);
}

result<void> store_file::touch() {
  FILETIME now{};
  ::GetSystemTimeAsFileTime(&now);
  if (!::SetFileTime(handle(), nullptr, nullptr, &now)) return call_failed("SetFileTime", path());
  return success();
}

result<store_directory> store_directory::open_root(const std::string& path) {
  PSYCH_TRY(SECURITY_ATTRIBUTES* const owner_only, owner_only_attributes());
  const std::filesystem::path full = platform::utf8_path(path);
  std::filesystem::path prefix;
  for (const auto& part : full) {
    prefix /= part;
    if (prefix == full.root_path() || prefix == full.root_name()) continue;  // "C:", "C:\", "\\server\share"
    const DWORD attributes = ::GetFileAttributesW(prefix.c_str());
    if (attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_DIRECTORY) != 0) continue;
    if (!::CreateDirectoryW(prefix.c_str(), owner_only) && ::GetLastError() != ERROR_ALREADY_EXISTS)
      return call_failed("CreateDirectoryW", windows::narrow(prefix.native()));
  }
  windows::unique_handle handle{::CreateFileW(full.c_str(), directory_access | SYNCHRONIZE,
                                              FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                                              OPEN_EXISTING, FILE_FLAG_BACKUP_SEMANTICS, nullptr)};
  if (!handle) return call_failed("CreateFileW", path);
  return store_directory{std::move(handle), path};
}

result<std::optional<store_directory>> store_directory::directory(const std::string& name, bool create) const {
  const std::string path = joined(path_, name);
  const std::wstring wide = windows::widen(name);
  beneath_request request{.access = directory_access, .options = FILE_DIRECTORY_FILE};
  opened_beneath opened;
  if (create) {
    PSYCH_TRY(SECURITY_ATTRIBUTES* const owner_only, owner_only_attributes());
    request.disposition = FILE_CREATE;
    request.security = owner_only->lpSecurityDescriptor;
    opened = open_beneath(handle_.get(), wide, request);
    if (opened.handle.valid()) {
      PSYCH_TRY(sync());
    } else if (!taken(opened.error())) {
      return call_failed("NtCreateFile", path, opened.error());
    }
    request.disposition = FILE_OPEN;
    request.security = nullptr;
  }
  if (!opened.handle.valid()) opened = open_beneath(handle_.get(), wide, request);
  if (!opened.handle.valid()) {
    if (absent(opened.error())) return std::optional<store_directory>{};
    if (opened.error() == ERROR_DIRECTORY) return not_ours(path, "not a directory");
    return call_failed("NtCreateFile", path, opened.error());
  }
  BY_HANDLE_FILE_INFORMATION info{};
  if (!::GetFileInformationByHandle(opened.handle.get(), &info)) return call_failed("GetFileInformationByHandle", path);
  if ((info.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) != 0) return not_ours(path, "not a directory");
  return std::optional<store_directory>{store_directory{std::move(opened.handle), path}};
}

result<std::optional<store_file>> store_directory::open_file(const std::string& name) const {
  const std::string path = joined(path_, name);
  auto opened = open_beneath(handle_.get(), windows::widen(name),
                             {.access = FILE_READ_DATA | FILE_READ_ATTRIBUTES | FILE_WRITE_ATTRIBUTES,
                              .options = FILE_NON_DIRECTORY_FILE});
  if (!opened.handle.valid()) {
    if (absent(opened.error())) return std::optional<store_file>{};
    if (opened.error() == ERROR_ACCESS_DENIED) {  // what Windows says for a directory opened as a file
      const auto entry_there = entry(name);
      if (entry_there && entry_there.value() && !entry_there.value()->regular) return not_ours(path, "not a regular file");
    }
    return call_failed("NtCreateFile", path, opened.error());
  }
  BY_HANDLE_FILE_INFORMATION info{};
  if (!::GetFileInformationByHandle(opened.handle.get(), &info)) return call_failed("GetFileInformationByHandle", path);
  if ((info.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) != 0) return not_ours(path, "a symbolic link, not a blob");
  if ((info.dwFileAttributes & (FILE_ATTRIBUTE_DIRECTORY | FILE_ATTRIBUTE_DEVICE)) != 0 ||
      ::GetFileType(opened.handle.get()) != FILE_TYPE_DISK)
    return not_ours(path, "not a regular file");
  return std::optional<store_file>{store_file{std::move(opened.handle), path}};
}

result<std::optional<store_file>> store_directory::create_file(const std::string& name) const {
  const std::string path = joined(path_, name);
  PSYCH_TRY(SECURITY_ATTRIBUTES* const owner_only, owner_only_attributes());
  // DELETE: the file is renamed into place, or removed, through this handle's own file.
  auto opened = open_beneath(handle_.get(), windows::widen(name),
                             {.access = FILE_GENERIC_WRITE | FILE_READ_ATTRIBUTES | DELETE,
                              .disposition = FILE_CREATE,
                              .options = FILE_NON_DIRECTORY_FILE,
                              .security = owner_only->lpSecurityDescriptor});
  if (!opened.handle.valid()) {
    if (taken(opened.error())) return std::optional<store_file>{};
    return call_failed("NtCreateFile", path, opened.error());
  }
  return std::optional<store_file>{store_file{std::move(opened.handle), path}};
}

result<bool> store_directory::move(store_file& file, const std::string&, const std::string& to, bool replace) const {
  const std::wstring target = windows::widen(to);
  // FILE_RENAME_INFORMATION ends in the name, its length in bytes beside it. NtSetInformationFile,
  // not SetFileInformationByHandle: the Win32 call may take the name for a DOS path (Wine's does,
  // and refuses one relative to a RootDirectory).
  std::vector<std::uint64_t> buffer((sizeof(FILE_RENAME_INFORMATION) + target.size() * sizeof(wchar_t) + 7) / 8);
  auto* rename = reinterpret_cast<FILE_RENAME_INFORMATION*>(buffer.data());
  rename->ReplaceIfExists = replace ? TRUE : FALSE;
  rename->RootDirectory = handle_.get();
  rename->FileNameLength = static_cast<ULONG>(target.size() * sizeof(wchar_t));
  std::copy(target.begin(), target.end(), rename->FileName);
  IO_STATUS_BLOCK status{};
  const NTSTATUS renamed = ::NtSetInformationFile(file.handle(), &status, rename,
                                                  static_cast<ULONG>(buffer.size() * sizeof(std::uint64_t)),
                                                  FileRenameInformation);
  if (renamed >= 0) return true;
  const DWORD error = ::RtlNtStatusToDosError(renamed);
  if (!replace && (taken(error) || error == ERROR_ACCESS_DENIED)) {
    // ERROR_ACCESS_DENIED is also what a target another process holds open reads as: taken only
    // if the name is there.
    PSYCH_TRY(auto there, entry(to));
    if (there) return false;
  }
  return call_failed("NtSetInformationFile(FileRenameInformation)", file.path(), error);
}

result<void> store_directory::remove(const std::string& name) const {
  const std::string path = joined(path_, name);
  auto opened = open_beneath(handle_.get(), windows::widen(name), {.access = DELETE, .options = FILE_NON_DIRECTORY_FILE});
  if (!opened.handle.valid()) {
    if (absent(opened.error())) return success();
    return call_failed("NtCreateFile", path, opened.error());
  }
  FILE_DISPOSITION_INFO_EX posix{FILE_DISPOSITION_FLAG_DELETE | FILE_DISPOSITION_FLAG_POSIX_SEMANTICS};
  if (::SetFileInformationByHandle(opened.handle.get(), file_disposition_info_ex, &posix, sizeof(posix))) return success();
  const DWORD error = ::GetLastError();
  if (error != ERROR_INVALID_PARAMETER && error != ERROR_NOT_SUPPORTED && error != ERROR_INVALID_FUNCTION)
    return call_failed("SetFileInformationByHandle(FileDispositionInfoEx)", path, error);
  FILE_DISPOSITION_INFO legacy{TRUE};  // a file system without POSIX deletion (FAT, older Windows)
  if (!::SetFileInformationByHandle(opened.handle.get(), FileDispositionInfo, &legacy, sizeof(legacy)))
    return call_failed("SetFileInformationByHandle(FileDispositionInfo)", path);
  return success();
}

result<std::vector<std::string>> store_directory::names() const {
  auto listed = names_beneath(handle_.get());
  if (listed.error != ERROR_SUCCESS) return call_failed("GetFileInformationByHandleEx", path_, listed.error);
  std::vector<std::string> names;
  names.reserve(listed.names.size());
  for (const auto& name : listed.names) names.push_back(windows::narrow(name));
  return names;
}

result<std::optional<store_entry>> store_directory::entry(const std::string& name) const {
  const std::string path = joined(path_, name);
  auto opened = open_beneath(handle_.get(), windows::widen(name), {.access = FILE_READ_ATTRIBUTES});
  if (!opened.handle.valid()) {
    if (absent(opened.error())) return std::optional<store_entry>{};
    return call_failed("NtCreateFile", path, opened.error());
  }
  BY_HANDLE_FILE_INFORMATION info{};
  if (!::GetFileInformationByHandle(opened.handle.get(), &info)) return call_failed("GetFileInformationByHandle", path);
  constexpr DWORD not_regular = FILE_ATTRIBUTE_DIRECTORY | FILE_ATTRIBUTE_REPARSE_POINT | FILE_ATTRIBUTE_DEVICE;
  return std::optional<store_entry>{store_entry{(info.dwFileAttributes & not_regular) == 0,
                                                (std::uint64_t{info.nFileSizeHigh} << 32) | info.nFileSizeLow,
                                                time_of(info.ftLastWriteTime)}};
}

result<void> store_directory::sync() const {
  if (!::FlushFileBuffers(handle_.get())) return call_failed("FlushFileBuffers", path_);
  return success();
}

}  // namespace psych::host
