#pragma once
// A file written in place and made durable on demand, held by one opener at a time: what the run
// log journals into (file_run_log.cpp). Every read and write names its offset, so no file position
// is shared between threads. Each system's half is its own file:
//   POSIX    a descriptor (close-on-exec), flock, pread/pwrite, ftruncate, fdatasync and fsync, and
//            fsync on the parent directory for a new file's entry;
//   Windows  a HANDLE (never inherited), LockFileEx on one byte far past any data (so a reader
//            elsewhere is not blocked, as flock does not block one), ReadFile/WriteFile at an
//            offset, SetFileInformationByHandle for the end of file, FlushFileBuffers for both
//            syncs and on the parent directory (docs/run-log.md, "On Windows").
// Errors are result values naming the call and the path: "pwrite(<path>): <the system's words>".
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "os/os_handle.hpp"
#include "psych/result.hpp"

namespace psych::host {

class durable_file {
 public:
  /// Opens `path` read-write, creating it (owner-only) when absent, and takes its exclusive lock.
  /// A lock another opener holds (another process, or another open in this one) fails at once
  /// with system_call_failed: "<lock call>(<path>): <what> is held by another process".
  static result<durable_file> open_exclusive(const std::string& path, std::string_view what);

  durable_file(durable_file&&) noexcept = default;
  durable_file& operator=(durable_file&&) noexcept = default;

  [[nodiscard]] const std::string& path() const noexcept { return path_; }

  /// The file's size now.
  [[nodiscard]] result<std::uint64_t> size() const;
  /// Reads up to `n` bytes at `offset`; fewer only where the file ends.
  [[nodiscard]] result<std::size_t> read_at(char* out, std::size_t n, std::uint64_t offset) const;
  /// Writes all of `bytes` at `offset`, growing the file as needed.
  [[nodiscard]] result<void> write_at(std::string_view bytes, std::uint64_t offset);
  /// Cuts the file, or extends it with zeros, to `size` bytes.
  [[nodiscard]] result<void> truncate(std::uint64_t size);
  /// Every byte written so far is durable, with what is needed to read it back (the size).
  [[nodiscard]] result<void> sync_data();
  /// As sync_data, and the file's other metadata too.
  [[nodiscard]] result<void> sync_all();
  /// A new file's directory entry is durable only once its directory is synced: that, for the
  /// directory `path` is in.
  [[nodiscard]] result<void> sync_directory() const;

 private:
  durable_file(unique_os_handle handle, std::string path) : handle_{std::move(handle)}, path_{std::move(path)} {}

  unique_os_handle handle_;
  std::string path_;
};

}  // namespace psych::host
