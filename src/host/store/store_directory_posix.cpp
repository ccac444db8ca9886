// store_directory.hpp on POSIX: every entry is reached with an *at() call from its directory's
// descriptor, with O_NOFOLLOW.
#include "store/store_directory.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "platform/posix/retry.hpp"

namespace psych::host {
namespace {

auto not_ours(std::string_view path, std::string_view why) {
  return fail_with(error_kind::blob_store_failed, fmt::format("{}: {}", path, why));
}

std::chrono::system_clock::time_point modified_of(const struct stat& info) {
#ifdef __APPLE__
  const auto& when = info.st_mtimespec;
#else
  const auto& when = info.st_mtim;
#endif
  return std::chrono::system_clock::time_point{std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::seconds{when.tv_sec} + std::chrono::nanoseconds{when.tv_nsec})};
}

}  // namespace

// write(), not pwrite(): the file is new and only this handle writes it, so its offset is where
// the last write ended.
result<void> store_file::append(std::string_view bytes) {
  const auto put = posix::write_all(handle(), bytes.data(), bytes.size());
  if (put.done < bytes.size()) return call_failed("write", path(), put.error != 0 ? put.error : EIO);
  return success();
}

result<void> store_file::touch() {
  if (::futimens(handle(), nullptr) != 0) return call_failed("futimens", path());
  return success();
}

result<store_directory> store_directory::open_root(const std::string& path) {
  for (std::size_t at = path.find('/', 1);; at = path.find('/', at + 1)) {
    const std::string prefix = path.substr(0, at);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) return call_failed("mkdir", prefix);
    if (at == std::string::npos) break;
  }
  unique_fd fd{::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (!fd.valid()) return call_failed("open", path);
  return store_directory{std::move(fd), path};
}

result<std::optional<store_directory>> store_directory::directory(const std::string& name, bool create) const {
  const std::string path = fmt::format("{}/{}", path_, name);
  if (create) {
    if (::mkdirat(handle_.get(), name.c_str(), 0700) == 0) {
      PSYCH_TRY(sync());
    } else if (errno != EEXIST) {
      return call_failed("mkdirat", path);
    }
  }
  unique_fd fd{::openat(handle_.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
  if (!fd.valid()) {
    if (errno == ENOENT) return std::optional<store_directory>{};
    if (errno == ELOOP || errno == ENOTDIR) return not_ours(path, "not a directory");
    return call_failed("openat", path);
  }
  return std::optional<store_directory>{store_directory{std::move(fd), path}};
}

result<std::optional<store_file>> store_directory::open_file(const std::string& name) const {
  const std::string path = fmt::format("{}/{}", path_, name);
  // O_NONBLOCK: a FIFO planted under the name must not hang the open.
  unique_fd fd{::openat(handle_.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)};
  if (!fd.valid()) {
    if (errno == ENOENT) return std::optional<store_file>{};
    if (errno == ELOOP) return not_ours(path, "a symbolic link, not a blob");
    return call_failed("openat", path);
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) return call_failed("fstat", path);
  if (!S_ISREG(info.st_mode)) return not_ours(path, "not a regular file");
  return std::optional<store_file>{store_file{std::move(fd), path}};
}

result<std::optional<store_file>> store_directory::create_file(const std::string& name) const {
  const std::string path = fmt::format("{}/{}", path_, name);
  unique_fd fd{::openat(handle_.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)};
  if (!fd.valid()) {
    if (errno == EEXIST) return std::optional<store_file>{};
    return call_failed("openat", path);
  }
  return std::optional<store_file>{store_file{std::move(fd), path}};
}

result<bool> store_directory::move(store_file& file, const std::string& from, const std::string& to,
                                   bool replace) const {
  if (!replace) {
    if (rename_no_replace(handle_.get(), from.c_str(), handle_.get(), to.c_str()) == 0) return true;
    if (errno == EEXIST) return false;
    if (errno != EINVAL && errno != ENOSYS)  // EINVAL: a file system without RENAME_NOREPLACE
      return call_failed("renameat2", file.path());
  }
  if (::renameat(handle_.get(), from.c_str(), handle_.get(), to.c_str()) != 0) return call_failed("renameat", file.path());
  return true;
}

result<void> store_directory::remove(const std::string& name) const {
  if (::unlinkat(handle_.get(), name.c_str(), 0) != 0 && errno != ENOENT)
    return call_failed("unlinkat", fmt::format("{}/{}", path_, name));
  return success();
}

result<std::vector<std::string>> store_directory::names() const {
  const int fd = ::openat(handle_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return call_failed("open", path_);
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    const auto failed = call_failed("fdopendir", path_);
    ::close(fd);
    return failed;
  }
  std::vector<std::string> names;
  for (;;) {
    errno = 0;
    const dirent* found = ::readdir(dir);
    if (found == nullptr) break;
    const std::string_view name = found->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  const int saved = errno;
  ::closedir(dir);
  if (saved != 0) return call_failed("readdir", path_, saved);
  return names;
}

result<std::optional<store_entry>> store_directory::entry(const std::string& name) const {
  struct stat info {};
  if (::fstatat(handle_.get(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return std::optional<store_entry>{};
    return call_failed("fstatat", fmt::format("{}/{}", path_, name));
  }
  return std::optional<store_entry>{
      store_entry{S_ISREG(info.st_mode), static_cast<std::uint64_t>(info.st_size), modified_of(info)}};
}

result<void> store_directory::sync() const {
  if (::fsync(handle_.get()) != 0) return call_failed("fsync", path_);
  return success();
}

}  // namespace psych::host
