// open_file.hpp on POSIX.
#include "store/open_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "platform/posix/retry.hpp"

namespace psych::host {

result<std::uint64_t> open_file::size() const {
  struct stat info {};
  if (::fstat(handle_.get(), &info) != 0) return call_failed("fstat", path_);
  return static_cast<std::uint64_t>(info.st_size);
}

result<std::size_t> open_file::read_at(char* out, std::size_t n, std::uint64_t offset) const {
  const auto got = posix::pread_all(handle_.get(), out, n, static_cast<off_t>(offset));
  if (got.error != 0) return call_failed("pread", path_, got.error);
  return got.done;
}

result<void> open_file::write_at(std::string_view bytes, std::uint64_t offset) {
  const auto put = posix::pwrite_all(handle_.get(), bytes.data(), bytes.size(), static_cast<off_t>(offset));
  if (put.done < bytes.size()) return call_failed("pwrite", path_, put.error != 0 ? put.error : EIO);
  return success();
}

result<void> open_file::sync() {
  if (::fsync(handle_.get()) != 0) return call_failed("fsync", path_);
  return success();
}

}  // namespace psych::host
