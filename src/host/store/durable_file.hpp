#pragma once
// A file written in place and made durable on demand, held by one opener at a time: what the run
// log journals into (file_run_log.cpp). Reading, writing at an offset, the size and the full sync
// are open_file's, which the BlobStore's files share; what this adds is each system's own:
//   POSIX    a descriptor (close-on-exec), flock, ftruncate, fdatasync, and fsync on the parent
//            directory for a new file's entry;
//   Windows  a HANDLE (never inherited), LockFileEx on one byte far past any data (so a reader
//            elsewhere is not blocked, as flock does not block one), SetFileInformationByHandle
//            for the end of file, FlushFileBuffers for the data-only sync too and on the parent
//            directory (docs/run-log.md, "On Windows").
// Errors are result values naming the call and the path: "pwrite(<path>): <the system's words>".
//
// Its directory is not a store_directory: the run log is opened by the path its user gave, not
// reached beneath a held directory, and needs of its directory only one sync, for a new file's entry.
#include <cstdint>
#include <string>
#include <string_view>

#include "os/os_handle.hpp"
#include "psych/result.hpp"
#include "store/open_file.hpp"

namespace psych::host {

class durable_file : public open_file {
 public:
  /// Opens `path` read-write, creating it (owner-only) when absent, and takes its exclusive lock.
  /// A lock another opener holds (another process, or another open in this one) fails at once
  /// with system_call_failed: "<lock call>(<path>): <what> is held by another process".
  static result<durable_file> open_exclusive(const std::string& path, std::string_view what);

  /// Cuts the file, or extends it with zeros, to `size` bytes.
  [[nodiscard]] result<void> truncate(std::uint64_t size);
  /// Every byte written so far is durable, with what is needed to read it back (the size); the
  /// file's other metadata may wait (sync() makes them durable too).
  [[nodiscard]] result<void> sync_data();
  /// A new file's directory entry is durable only once its directory is synced: that, for the
  /// directory `path` is in.
  [[nodiscard]] result<void> sync_directory() const;

 private:
  durable_file(unique_os_handle handle, std::string path) : open_file{std::move(handle), std::move(path)} {}
};

}  // namespace psych::host
