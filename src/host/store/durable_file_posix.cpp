// durable_file.hpp on POSIX. flock's lock belongs to the open file description: a second open,
// in this process or another, is refused, and the kernel drops the lock when the holder dies,
// SIGKILL included.
#include "store/durable_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include <fmt/format.h>

namespace psych::host {

result<durable_file> durable_file::open_exclusive(const std::string& path, std::string_view what) {
  unique_fd fd{::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)};
  if (!fd.valid()) return call_failed("open", path);
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK)
      return fail_with(error_kind::system_call_failed,
                     fmt::format("flock({}): {} is held by another process", path, what));
    return call_failed("flock", path);
  }
  return durable_file{std::move(fd), path};
}

result<std::uint64_t> durable_file::size() const {
  struct stat info {};
  if (::fstat(handle_.get(), &info) != 0) return call_failed("fstat", path_);
  return static_cast<std::uint64_t>(info.st_size);
}

result<std::size_t> durable_file::read_at(char* out, std::size_t n, std::uint64_t offset) const {
  const ssize_t got = pread_full(handle_.get(), out, n, offset);
  if (got < 0) return call_failed("pread", path_);
  return static_cast<std::size_t>(got);
}

result<void> durable_file::write_at(std::string_view bytes, std::uint64_t offset) {
  while (!bytes.empty()) {
    const ssize_t put = ::pwrite(handle_.get(), bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) return call_failed("pwrite", path_);
    bytes.remove_prefix(static_cast<std::size_t>(put));
    offset += static_cast<std::uint64_t>(put);
  }
  return success();
}

result<void> durable_file::truncate(std::uint64_t size) {
  if (::ftruncate(handle_.get(), static_cast<off_t>(size)) != 0) return call_failed("ftruncate", path_);
  return success();
}

result<void> durable_file::sync_data() {
  if (::fdatasync(handle_.get()) != 0) return call_failed("fdatasync", path_);
  return success();
}

result<void> durable_file::sync_all() {
  if (::fsync(handle_.get()) != 0) return call_failed("fsync", path_);
  return success();
}

result<void> durable_file::sync_directory() const {
  std::string dir = std::filesystem::path{path_}.parent_path().string();
  if (dir.empty()) dir = ".";
  const unique_fd handle{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (!handle.valid()) return call_failed("open", dir);
  if (::fsync(handle.get()) != 0) return call_failed("fsync", dir);
  return success();
}

}  // namespace psych::host
