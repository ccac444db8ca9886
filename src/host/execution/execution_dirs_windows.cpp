// execution_dirs.hpp on Windows. The directories are made with a protected DACL that grants the
// worker's own account and SYSTEM alone (inherited by what is made inside), so other accounts on
// the machine cannot look in; the child runs as the worker's account (identity is UNAVAILABLE on
// Windows), so the canary proves nothing there and the filesystem grades UNAVAILABLE whatever it
// reads (docs/windows-launcher.md). Removal never follows a reparse point (a symlink or junction
// the program planted is removed, not what it points at), and takes one directory handle at a
// time, whatever the depth.
#include "execution/execution_dirs.hpp"

#include <windows.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "platform/windows/text.hpp"  // widen, narrow, error_text
#include "os/os_handle.hpp"
#include "os/owner_only_security.hpp"
#include "os/random_hex.hpp"
#include "platform/utf8_path.hpp"

namespace psych::host {
namespace {

namespace fs = std::filesystem;

std::string failed(const char* call, const std::wstring& path, DWORD error = ::GetLastError()) {
  return fmt::format("{}({}): {}", call, windows::narrow(path), windows::error_text(error));
}

/// A directory of a fresh random name in `root`; its path.
result<std::wstring> make_unique_dir(const std::wstring& root, const char* prefix, SECURITY_ATTRIBUTES* owner_only) {
  for (int attempt = 0;; ++attempt) {
    const std::wstring path = (fs::path(root) / windows::widen(prefix + random_hex(8))).native();
    if (::CreateDirectoryW(path.c_str(), owner_only)) return path;
    const DWORD error = ::GetLastError();
    if (error != ERROR_ALREADY_EXISTS || attempt == 8)
      return fail_with(error_kind::system_call_failed, failed("CreateDirectoryW", path, error));
  }
}

result<void> make_dir(const std::wstring& path, SECURITY_ATTRIBUTES* owner_only) {
  if (!::CreateDirectoryW(path.c_str(), owner_only))
    return fail_with(error_kind::system_call_failed, failed("CreateDirectoryW", path));
  return success();
}

/// `path` with the prefix that lifts MAX_PATH, so a program's deep tree can still be removed.
std::wstring long_path(const std::wstring& path) {
  return path.starts_with(L"\\\\") ? path : L"\\\\?\\" + path;
}

/// Deletes one entry where it stands: a file, a reparse point (never what it points at), or an
/// empty directory; a read-only attribute the program set is cleared first.
bool remove_entry(const std::wstring& path, DWORD attributes) {
  if ((attributes & FILE_ATTRIBUTE_READONLY) != 0) ::SetFileAttributesW(path.c_str(), FILE_ATTRIBUTE_NORMAL);
  if ((attributes & FILE_ATTRIBUTE_DIRECTORY) != 0) return ::RemoveDirectoryW(path.c_str()) != 0;
  return ::DeleteFileW(path.c_str()) != 0;
}

/// The names in `dir` with their attributes; one find handle, closed before this returns.
std::vector<std::pair<std::wstring, DWORD>> entries_of(const std::wstring& dir) {
  std::vector<std::pair<std::wstring, DWORD>> found;
  WIN32_FIND_DATAW entry{};
  HANDLE find = ::FindFirstFileExW((dir + L"\\*").c_str(), FindExInfoBasic, &entry, FindExSearchNameMatch, nullptr, 0);
  if (find == INVALID_HANDLE_VALUE) return found;
  do {
    const std::wstring_view name = entry.cFileName;
    if (name != L"." && name != L"..") found.emplace_back(std::wstring(name), entry.dwFileAttributes);
  } while (::FindNextFileW(find, &entry));
  ::FindClose(find);
  return found;
}

/// Removes a tree of any depth: directories are visited from a list, not by recursion, and a
/// reparse point is removed as the link it is, never entered.
bool remove_tree(const std::wstring& top) {
  const std::wstring root = long_path(top);
  const DWORD root_attributes = ::GetFileAttributesW(root.c_str());
  if (root_attributes == INVALID_FILE_ATTRIBUTES) return ::GetLastError() == ERROR_FILE_NOT_FOUND;
  if ((root_attributes & FILE_ATTRIBUTE_DIRECTORY) == 0 || (root_attributes & FILE_ATTRIBUTE_REPARSE_POINT) != 0)
    return remove_entry(root, root_attributes);
  std::vector<std::wstring> directories{root};  // every directory found, parents before children
  for (std::size_t next = 0; next < directories.size(); ++next) {
    const std::wstring dir = directories[next];  // a copy: the vector grows below
    for (const auto& [name, attributes] : entries_of(dir)) {
      const std::wstring path = dir + L"\\" + name;
      const bool real_directory =
          (attributes & FILE_ATTRIBUTE_DIRECTORY) != 0 && (attributes & FILE_ATTRIBUTE_REPARSE_POINT) == 0;
      if (real_directory) directories.push_back(path);
      else (void)remove_entry(path, attributes);
    }
  }
  bool all = true;
  for (auto it = directories.rbegin(); it != directories.rend(); ++it)
    all = remove_entry(*it, ::GetFileAttributesW(it->c_str())) && all;
  return all;
}

}  // namespace

result<execution_dirs> make_execution_dirs(const std::string& temp_root) {
  PSYCH_TRY(SECURITY_ATTRIBUTES* const owner_only, owner_only_attributes());
  // Absolute: removal prefixes the paths with \\?\, which takes no relative path. Empty: the
  // account's temporary directory (psych/host/sandbox.hpp, default_temp_root).
  std::error_code ec;
  const fs::path named = temp_root.empty() ? fs::temp_directory_path(ec) : platform::utf8_path(temp_root);
  if (ec) return fail_with(error_kind::system_call_failed, fmt::format("the temporary directory: {}", ec.message()));
  // Without a trailing separator ("C:\\Temp\\" is GetTempPath's), so that what is joined below has
  // no doubled one, which a \\?\ path does not forgive; a drive's root keeps its own.
  auto normal = fs::absolute(named, ec).lexically_normal();
  if (!normal.has_filename() && normal.has_relative_path()) normal = normal.parent_path();
  const std::wstring root = normal.native();
  if (ec) return fail_with(error_kind::system_call_failed, fmt::format("the temp root {}: {}", temp_root, ec.message()));
  execution_dirs dirs;
  PSYCH_TRY(auto base, make_unique_dir(root, "psych-", owner_only));
  dirs.base = windows::narrow(base);
  dirs.workspace = dirs.base + "\\workspace";
  dirs.tmp = dirs.base + "\\tmp";
  auto made = make_dir(base + L"\\workspace", owner_only);
  if (made) made = make_dir(base + L"\\tmp", owner_only);
  auto canary_dir = made ? make_unique_dir(root, "psych-canary-", owner_only) : result<std::wstring>(made.error());
  if (!canary_dir) {
    (void)remove_execution_dirs(dirs);
    return canary_dir.error();
  }
  dirs.canary_dir = windows::narrow(canary_dir.value());
  dirs.canary = dirs.canary_dir + "\\canary";
  const std::wstring canary = canary_dir.value() + L"\\canary";
  unique_os_handle file{
      ::CreateFileW(canary.c_str(), GENERIC_WRITE, 0, owner_only, CREATE_NEW, FILE_ATTRIBUTE_NORMAL, nullptr)};
  const auto content = "psych canary " + random_hex(16) + "\n";
  DWORD written = 0;
  const char* call = file.valid() ? "WriteFile" : "CreateFileW";
  const bool wrote = file.valid() &&
                     ::WriteFile(file.get(), content.data(), static_cast<DWORD>(content.size()), &written, nullptr) &&
                     written == content.size();
  const DWORD error = ::GetLastError();
  file.reset();  // closed before the removal below, which an open canary would stop
  if (!wrote) {
    (void)remove_execution_dirs(dirs);
    return fail_with(error_kind::system_call_failed, "writing the canary: " + failed(call, canary, error));
  }
  return dirs;
}

bool remove_execution_dirs(const execution_dirs& dirs) {
  const bool base = dirs.base.empty() || remove_tree(windows::widen(dirs.base));
  const bool canary = dirs.canary_dir.empty() || remove_tree(windows::widen(dirs.canary_dir));
  return base && canary;
}

void sweep_shared_temp(std::int64_t /*uid*/) {
  // Nothing to sweep: Windows children run as the worker's own account, never a uid of their own
  // whose leftovers could be told from the worker's.
}

}  // namespace psych::host
