// durable_file.hpp on POSIX. flock's lock belongs to the open file description: a second open,
// in this process or another, is refused, and the kernel drops the lock when the holder dies,
// SIGKILL included.
#include "store/durable_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include <fmt/format.h>

#include "platform/posix/retry.hpp"

namespace psych::host {

result<durable_file> durable_file::open_exclusive(const std::string& path, std::string_view what) {
  unique_fd fd{::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)};
  if (!fd.valid()) return call_failed("open", path);
  if (posix::retry_on_eintr([&] { return ::flock(fd.get(), LOCK_EX | LOCK_NB); }) != 0) {
    if (errno == EWOULDBLOCK)
      return fail_with(error_kind::system_call_failed,
                     fmt::format("flock({}): {} is held by another process", path, what));
    return call_failed("flock", path);
  }
  return durable_file{std::move(fd), path};
}

result<void> durable_file::truncate(std::uint64_t size) {
  if (::ftruncate(handle(), static_cast<off_t>(size)) != 0) return call_failed("ftruncate", path());
  return success();
}

result<void> durable_file::sync_data() {
  if (::fdatasync(handle()) != 0) return call_failed("fdatasync", path());
  return success();
}

result<void> durable_file::sync_directory() const {
  std::string dir = std::filesystem::path{path()}.parent_path().string();
  if (dir.empty()) dir = ".";
  const unique_fd opened{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (!opened.valid()) return call_failed("open", dir);
  if (::fsync(opened.get()) != 0) return call_failed("fsync", dir);
  return success();
}

}  // namespace psych::host
