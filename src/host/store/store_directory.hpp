#pragma once
// The file system as the BlobStore (file_blob_store.cpp) meets it: directories held open by
// handle, and entries reached from them by one name that the store computed itself (hex), never by
// a whole path. No entry is followed through a symbolic link or junction, so one planted under a
// blob's or a tenant's name is refused, not read through. Each system's half is its own file:
//   POSIX    descriptors and the *at() calls, O_NOFOLLOW, renameat2(RENAME_NOREPLACE), fsync;
//   Windows  handles and NtCreateFile relative to a directory's handle (open_beneath_windows.hpp)
//            with FILE_OPEN_REPARSE_POINT, renames and deletes through the file's own handle,
//            FlushFileBuffers (docs/blob-store.md, "On Windows").
// Made directories and files are private to the worker's account: 0700 and 0600 on POSIX, a
// protected DACL granting the account and SYSTEM alone on Windows.
//
// Errors are result values: a system call's failure is system_call_failed naming the call and the
// path; an entry that is not what the store made (a link, a FIFO, a file where a directory should
// be) is blob_store_failed, "<path>: <why>", which the store reads as damage.
//
// A store_file is an open_file, as the run log's durable_file is: reading, writing at an offset,
// the size and the sync are written once for both. The directory stays the BlobStore's own: the
// run log is one file at a path its user chose, opened by that path and locked, while the store
// reaches every entry by name beneath a directory it holds open, which is what keeps a planted link
// from being followed; the two share no call beyond the sync.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "os/os_handle.hpp"
#include "psych/result.hpp"
#include "store/open_file.hpp"

namespace psych::host {

/// An open file of the store: reading at an offset, the size and sync() are open_file's.
class store_file : public open_file {
 public:
  using open_file::open_file;

  /// Writes all of `bytes` where the last write ended (a file made by create_file).
  [[nodiscard]] result<void> append(std::string_view bytes);
  /// Its modification time becomes now.
  [[nodiscard]] result<void> touch();
};

/// One entry of a directory as it is, a link not followed.
struct store_entry {
  bool regular = false;  ///< a regular file (not a link, a directory, a FIFO or a device)
  std::uint64_t size = 0;
  std::chrono::system_clock::time_point modified;
};

class store_directory {
 public:
  /// Opens `path`, creating it and any missing parents (private) first.
  static result<store_directory> open_root(const std::string& path);

  [[nodiscard]] const std::string& path() const noexcept { return path_; }

  /// The directory `name` in this one; with `create`, made (private) when absent, and this
  /// directory synced so that the new entry is durable. Nothing when absent and not created.
  [[nodiscard]] result<std::optional<store_directory>> directory(const std::string& name, bool create) const;
  /// The regular file `name`, opened for reading and touching, neither following a link nor
  /// waiting on a FIFO; nothing when absent.
  [[nodiscard]] result<std::optional<store_file>> open_file(const std::string& name) const;
  /// A new file `name` (private) for writing; nothing when the name is taken.
  [[nodiscard]] result<std::optional<store_file>> create_file(const std::string& name) const;
  /// Moves `file`, made here as `from`, to `to` in this directory. Without `replace`, false when
  /// `to` exists (where the file system cannot refuse that atomically, the move replaces it).
  [[nodiscard]] result<bool> move(store_file& file, const std::string& from, const std::string& to, bool replace) const;
  /// Removes the file `name`; one already gone is no error.
  [[nodiscard]] result<void> remove(const std::string& name) const;
  /// The names in this directory, "." and ".." left out.
  [[nodiscard]] result<std::vector<std::string>> names() const;
  /// `name` as it is; nothing when absent.
  [[nodiscard]] result<std::optional<store_entry>> entry(const std::string& name) const;
  /// Its entries are durable.
  [[nodiscard]] result<void> sync() const;

 private:
  store_directory(unique_os_handle handle, std::string path) : handle_{std::move(handle)}, path_{std::move(path)} {}

  unique_os_handle handle_;
  std::string path_;
};

}  // namespace psych::host
