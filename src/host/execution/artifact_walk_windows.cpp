// artifact_walk.hpp on Windows. Every entry below the workspace is opened by one name relative to
// its directory's handle (open_beneath_windows.hpp: NtCreateFile with a RootDirectory, the openat of
// Windows) and with FILE_OPEN_REPARSE_POINT, so a symlink or junction is opened as itself and never
// followed; what was opened is classified from that handle (GetFileInformationByHandle) and read
// through it, so nothing is reached by its name twice and a program racing to swap a directory for
// a link gains nothing. What is kept is artifact_harvest.hpp's decision, as on POSIX.
#include "execution/artifact_walk.hpp"

#include <windows.h>
#include <winternl.h>

#include <algorithm>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "execution/artifact_harvest.hpp"
#include "platform/windows/text.hpp"  // widen, narrow, error_text
#include "os/open_beneath_windows.hpp"
#include "os/os_handle.hpp"

namespace psych::host {
namespace {

/// Reading, listing and classifying; the share mode lets the program's leftovers be deleted
/// meanwhile (the session removes the workspace after this).
constexpr beneath_request entry_request{.access = FILE_READ_DATA | FILE_READ_ATTRIBUTES};

class walker {
 public:
  explicit walker(const artifact_policy& policy) : kept_(policy) {}

  /// `dir` is a directory handle; `prefix` is its workspace-relative path with a trailing '/'
  /// (empty for the workspace); `depth` counts its path components (0 for the workspace).
  void walk(HANDLE dir, const std::string& prefix, std::uint64_t depth) {
    // Sorted, so which files a limit leaves out does not depend on the directory's order.
    auto names = names_in(dir);
    std::ranges::sort(names);
    for (const auto& name : names) visit(dir, name, prefix + windows::narrow(name), depth);
  }

  harvest take() && { return std::move(kept_).take(); }

 private:
  void omit(omission_reason why) { kept_.omit(why); }

  /// The names in `dir`, from its handle; a listing that failed part way loses the rest.
  std::vector<std::wstring> names_in(HANDLE dir) {
    auto listed = names_beneath(dir);
    if (listed.error != ERROR_SUCCESS) omit(omission_reason::unreadable);
    return std::move(listed.names);
  }

  /// Opens one entry once, classifies it from that handle, then collects (reading that handle),
  /// descends (listing it) or omits it.
  void visit(HANDLE dir, const std::wstring& name, const std::string& path, std::uint64_t depth) {
    const unique_os_handle handle = open_beneath(dir, name, entry_request).handle;
    if (!handle.valid()) return omit(omission_reason::unreadable);
    BY_HANDLE_FILE_INFORMATION info{};
    if (!::GetFileInformationByHandle(handle.get(), &info)) return omit(omission_reason::unreadable);
    if ((info.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) != 0) return omit(omission_reason::symlink);
    if ((info.dwFileAttributes & FILE_ATTRIBUTE_DEVICE) != 0) return omit(omission_reason::device);
    if ((info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) != 0) {
      if (kept_.may_descend(depth + 1)) walk(handle.get(), path + "/", depth + 1);
      return;
    }
    if (::GetFileType(handle.get()) != FILE_TYPE_DISK) return omit(omission_reason::special);
    if (info.nNumberOfLinks > 1) return omit(omission_reason::hardlink);
    take_file(handle.get(), path, (std::uint64_t{info.nFileSizeHigh} << 32) | info.nFileSizeLow);
  }

  /// Reads the regular file `file` was classified as, from that handle.
  void take_file(HANDLE file, const std::string& path, std::uint64_t classified_size) {
    kept_.take_file(path, classified_size, [file](char* into, std::size_t want) -> std::optional<std::size_t> {
      DWORD got = 0;
      if (!::ReadFile(file, into, static_cast<DWORD>(want), &got, nullptr)) return std::nullopt;
      return got;
    });
  }

  harvester kept_;
};

}  // namespace

result<harvest> collect_artifacts(const std::string& workspace, const artifact_policy& policy) {
  if (policy.collection == artifact_collection::none) return harvest{};
  const std::wstring path = windows::widen(workspace);
  // The workspace itself, never through a link: it must be the directory the host made.
  const unique_os_handle root{::CreateFileW(path.c_str(), entry_request.access | SYNCHRONIZE, entry_request.share,
                                            nullptr, OPEN_EXISTING,
                                            FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT, nullptr)};
  BY_HANDLE_FILE_INFORMATION info{};
  if (!root.valid() || !::GetFileInformationByHandle(root.get(), &info))
    return fail_with(error_kind::system_call_failed,
                   fmt::format("CreateFileW({}): {}", workspace, windows::error_text(::GetLastError())));
  if ((info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) == 0 || (info.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) != 0)
    return fail_with(error_kind::system_call_failed, fmt::format("{} is not a directory of its own", workspace));
  walker walk(policy);
  walk.walk(root.get(), "", 0);
  return std::move(walk).take();
}

}  // namespace psych::host
