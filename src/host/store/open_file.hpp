#pragma once
// A file of the store held open by its handle, with the path its errors name: what the run log's
// durable_file and the BlobStore's store_file both are before what each adds (the lock, truncation
// and the data-only sync; appending and touching). Reads and writes name their offset, so no file
// position is shared between threads. Each system's half is its own file:
//   POSIX    fstat, pread/pwrite (interrupted and short calls resumed), fsync;
//   Windows  GetFileSizeEx, ReadFile/WriteFile at an offset (an OVERLAPPED names it, on a handle
//            opened for synchronous I/O), FlushFileBuffers.
// Errors are result values naming the call and the path: "pwrite(<path>): <the system's words>".
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "os/os_handle.hpp"
#include "psych/result.hpp"

namespace psych::host {

class open_file {
 public:
  open_file(unique_os_handle handle, std::string path) : handle_{std::move(handle)}, path_{std::move(path)} {}

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] os_handle handle() const noexcept { return handle_.get(); }

  /// The file's size now.
  [[nodiscard]] result<std::uint64_t> size() const;
  /// Reads up to `n` bytes at `offset`; fewer only where the file ends.
  [[nodiscard]] result<std::size_t> read_at(char* out, std::size_t n, std::uint64_t offset) const;
  /// Writes all of `bytes` at `offset`, growing the file as needed.
  [[nodiscard]] result<void> write_at(std::string_view bytes, std::uint64_t offset);
  /// Its data and metadata are durable.
  [[nodiscard]] result<void> sync();

 private:
  unique_os_handle handle_;
  std::string path_;
};

}  // namespace psych::host
