// The embedded BlobStore: one directory per tenant, one file per blob; layout in docs/blob-store.md.
//
// Every name this file builds is hex it computed itself (a tenant's hash, a content hash, a random
// temporary suffix), and every file is reached with *at() calls from the root's descriptor, so no
// caller string ever becomes part of a path. A blob appears only when a fully written, fsynced
// temporary file is renamed onto its content address, so a reader sees a whole blob or none. The
// store keeps no mutable state in memory: concurrent put/stat/read from several threads (or
// processes) rest on the filesystem's atomic rename and need no lock.
#include "sha256.hpp"
#include "posix.hpp"
#include "psych/host/blob_store.hpp"
#include "random_hex.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <boost/endian/conversion.hpp>
#include <fmt/format.h>
#include <openssl/evp.h>

namespace psych {
namespace {

constexpr std::string_view handle_prefix = "blob:";
constexpr std::size_t digest_hex_digits = 64;
constexpr std::string_view tenant_prefix = "t-";
constexpr std::size_t tenant_hex_digits = 32;
constexpr std::string_view temp_prefix = ".tmp-";
// A blob file: magic, u64 LE content size, u16 LE content-type length, the content type, the content.
constexpr std::string_view magic = "PSYCHBL1";
constexpr std::size_t fixed_header_bytes = 8 + 8 + 2;
constexpr std::size_t max_content_type_bytes = 1024;
constexpr auto stale_temp_age = std::chrono::hours(1);

using host::unique_fd;
using host::pread_full;
using host::random_hex;

auto syscall_failure(std::string_view call, std::string_view path) {
  return failure(error_kind::system_call_failed, fmt::format("{}({}): {}", call, path, std::strerror(errno)));
}

auto damaged(std::string_view path, std::string_view why) {
  return failure(error_kind::blob_store_failed, fmt::format("{}: {}", path, why));
}

/// The same words for a malformed handle, another tenant's handle and one that never existed.
auto not_found() { return failure(error_kind::blob_not_found, "no blob with this handle for this tenant"); }

/// The store's digests: a failing digest is the store's failure.
result<std::string> sha256_hex(std::string_view bytes) {
  auto hex = host::sha256_hex(bytes);
  if (!hex) return failure(error_kind::blob_store_failed, hex.error().detail);
  return hex;
}

bool is_lower_hex(std::string_view text, std::size_t digits) {
  return text.size() == digits &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

/// The 64 hex digits of a well-formed handle; nothing else reaches the filesystem.
std::optional<std::string_view> digest_of(std::string_view handle) {
  if (!handle.starts_with(handle_prefix)) return std::nullopt;
  handle.remove_prefix(handle_prefix.size());
  if (!is_lower_hex(handle, digest_hex_digits)) return std::nullopt;
  return handle;
}

result<std::string> tenant_dir_name(std::string_view tenant) {
  PSYCH_TRY(auto hex, sha256_hex(tenant));
  return std::string{tenant_prefix} + hex.substr(0, tenant_hex_digits);
}

std::string header_for(std::string_view content_type, std::uint64_t size) {
  std::string header(fixed_header_bytes, '\0');
  auto* raw = reinterpret_cast<unsigned char*>(header.data());
  std::memcpy(raw, magic.data(), magic.size());
  boost::endian::store_little_u64(raw + 8, size);
  boost::endian::store_little_u16(raw + 16, static_cast<std::uint16_t>(content_type.size()));
  header.append(content_type);
  return header;
}

/// Reads exactly `n` bytes; fewer means the file is shorter than its header says.
result<void> read_at(int fd, std::string_view path, char* out, std::size_t n, std::uint64_t offset) {
  const ssize_t got = pread_full(fd, out, n, offset);
  if (got < 0) return syscall_failure("pread", path);
  if (static_cast<std::size_t>(got) < n) return damaged(path, "shorter than its header says");
  return success();
}

result<void> write_all(int fd, std::string_view path, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t put = ::write(fd, bytes.data(), bytes.size());
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) return syscall_failure("write", path);
    bytes.remove_prefix(static_cast<std::size_t>(put));
  }
  return success();
}

result<std::vector<std::string>> names_in(int dir_fd, std::string_view path) {
  const int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return syscall_failure("open", path);
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    const auto failed = syscall_failure("fdopendir", path);
    ::close(fd);
    return failed;
  }
  std::vector<std::string> names;
  for (;;) {
    errno = 0;
    const dirent* entry = ::readdir(dir);
    if (entry == nullptr) break;
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  const int saved = errno;
  ::closedir(dir);
  errno = saved;
  if (saved != 0) return syscall_failure("readdir", path);
  return names;
}

std::chrono::system_clock::time_point mtime_of(const struct stat& info) {
  return std::chrono::system_clock::time_point{
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::seconds{info.st_mtim.tv_sec} +
                                                                     std::chrono::nanoseconds{info.st_mtim.tv_nsec})};
}

struct open_blob {
  unique_fd fd;
  blob_info info;
  std::uint64_t content_offset = 0;
};

/// A temporary file that is unlinked unless it was renamed into place.
class temp_file {
 public:
  temp_file(int dir_fd, std::string name, unique_fd fd) : dir_fd_{dir_fd}, name_{std::move(name)}, fd_{std::move(fd)} {}
  temp_file(temp_file&& other) noexcept
      : dir_fd_{other.dir_fd_}, name_{std::move(other.name_)}, fd_{std::move(other.fd_)},
        committed_{std::exchange(other.committed_, true)} {}
  temp_file& operator=(temp_file&&) = delete;
  ~temp_file() {
    if (!committed_) ::unlinkat(dir_fd_, name_.c_str(), 0);
  }
  [[nodiscard]] int fd() const noexcept { return fd_.get(); }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  void commit() noexcept { committed_ = true; }

 private:
  int dir_fd_;
  std::string name_;
  unique_fd fd_;
  bool committed_ = false;
};

class file_blob_store final : public directory_blob_store {
 public:
  file_blob_store(std::string root, unique_fd root_fd, blob_retention retention)
      : root_{std::move(root)}, root_fd_{std::move(root_fd)}, retention_{retention} {}

  result<blob_info> put(std::string_view tenant, std::string_view content_type, std::string_view bytes) override {
    if (content_type.size() > max_content_type_bytes)
      return failure(error_kind::invalid_argument, fmt::format("a content type of {} bytes exceeds the {}-byte cap",
                                                               content_type.size(), max_content_type_bytes));
    PSYCH_TRY(auto digest, sha256_hex(bytes));
    PSYCH_TRY(auto tenant_name, tenant_dir_name(tenant));
    const std::string dir_path = fmt::format("{}/{}", root_, tenant_name);
    PSYCH_TRY(auto dir, make_tenant_dir(tenant_name, dir_path));

    // Dedupe: a whole blob of the right size is kept (first content type wins) and its mtime
    // refreshed, since retention counts from the last put. A damaged one is rewritten below.
    PSYCH_TRY(auto kept, keep_existing(dir.get(), dir_path, digest, bytes.size()));
    if (kept) return std::move(kept).value();

    PSYCH_TRY(auto temp, create_temp(dir.get(), dir_path));
    const std::string temp_path = fmt::format("{}/{}", dir_path, temp.name());
    PSYCH_TRY(write_all(temp.fd(), temp_path, header_for(content_type, bytes.size())));
    PSYCH_TRY(write_all(temp.fd(), temp_path, bytes));
    if (::fsync(temp.fd()) != 0) return syscall_failure("fsync", temp_path);

    // No-replace first, so two racing puts of the same bytes agree on one stored content type.
    if (host::rename_no_replace(dir.get(), temp.name().c_str(), dir.get(), digest.c_str()) != 0) {
      if (errno == EEXIST) {
        PSYCH_TRY(auto raced, keep_existing(dir.get(), dir_path, digest, bytes.size()));
        if (raced) return std::move(raced).value();  // the temporary file goes with `temp`
      } else if (errno != EINVAL && errno != ENOSYS) {  // EINVAL: a filesystem without RENAME_NOREPLACE
        return syscall_failure("renameat2", temp_path);
      }
      if (::renameat(dir.get(), temp.name().c_str(), dir.get(), digest.c_str()) != 0)
        return syscall_failure("renameat", temp_path);
    }
    temp.commit();
    if (::fsync(dir.get()) != 0) return syscall_failure("fsync", dir_path);
    return blob_info{std::string{handle_prefix} + digest, std::string{content_type}, bytes.size()};
  }

  result<blob_info> stat(std::string_view tenant, std::string_view handle) const override {
    PSYCH_TRY(auto blob, find(tenant, handle));
    if (!blob) return not_found();
    return std::move(blob->info);
  }

  result<std::string> read(std::string_view tenant, std::string_view handle, std::uint64_t offset,
                           std::uint64_t length) const override {
    PSYCH_TRY(auto blob, find(tenant, handle));
    if (!blob) return not_found();
    const std::uint64_t size = blob->info.size_bytes;
    if (offset >= size) return std::string{};
    const auto n = static_cast<std::size_t>(std::min(length, size - offset));
    std::string out(n, '\0');
    PSYCH_TRY(read_at(blob->fd.get(), blob->info.handle, out.data(), n, blob->content_offset + offset));
    return out;
  }

  result<std::uint64_t> sweep() override {
    const auto now = std::chrono::system_clock::now();
    PSYCH_TRY(auto names, names_in(root_fd_.get(), root_));
    std::uint64_t removed = 0;
    for (const auto& name : names) {
      if (!name.starts_with(tenant_prefix) ||
          !is_lower_hex(std::string_view{name}.substr(tenant_prefix.size()), tenant_hex_digits))
        continue;  // not ours
      const unique_fd dir{::openat(root_fd_.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
      if (dir.get() < 0) continue;  // gone, or not a directory: not ours either
      PSYCH_TRY(auto count, sweep_tenant(dir.get(), fmt::format("{}/{}", root_, name), now));
      removed += count;
    }
    return removed;
  }

 private:
  result<unique_fd> make_tenant_dir(const std::string& name, const std::string& path) const {
    if (::mkdirat(root_fd_.get(), name.c_str(), 0700) == 0) {
      if (::fsync(root_fd_.get()) != 0) return syscall_failure("fsync", root_);
    } else if (errno != EEXIST) {
      return syscall_failure("mkdirat", path);
    }
    unique_fd dir{::openat(root_fd_.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
    if (dir.get() < 0) {
      if (errno == ELOOP || errno == ENOTDIR) return damaged(path, "not a directory");
      return syscall_failure("openat", path);
    }
    return dir;
  }

  /// The caller's blob, or nothing when the handle is malformed or names no blob of this tenant.
  result<std::optional<open_blob>> find(std::string_view tenant, std::string_view handle) const {
    const auto digest = digest_of(handle);
    if (!digest) return std::optional<open_blob>{};
    PSYCH_TRY(auto tenant_name, tenant_dir_name(tenant));
    const std::string dir_path = fmt::format("{}/{}", root_, tenant_name);
    const unique_fd dir{::openat(root_fd_.get(), tenant_name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
    if (dir.get() < 0) {
      if (errno == ENOENT) return std::optional<open_blob>{};
      if (errno == ELOOP || errno == ENOTDIR) return damaged(dir_path, "not a directory");
      return syscall_failure("openat", dir_path);
    }
    return open_existing(dir.get(), dir_path, std::string{*digest});
  }

  /// Opens and checks a stored blob: its header is whole and the file is exactly as long as the
  /// header says. The content is not rehashed (reads are windows; a rehash would read it all).
  static result<std::optional<open_blob>> open_existing(int dir_fd, const std::string& dir_path,
                                                         const std::string& digest) {
    const std::string path = fmt::format("{}/{}", dir_path, digest);
    // O_NONBLOCK: a FIFO planted under a blob's name must not hang the open.
    unique_fd fd{::openat(dir_fd, digest.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)};
    if (fd.get() < 0) {
      if (errno == ENOENT) return std::optional<open_blob>{};
      if (errno == ELOOP) return damaged(path, "a symbolic link, not a blob");
      return syscall_failure("openat", path);
    }
    struct stat info {};
    if (::fstat(fd.get(), &info) != 0) return syscall_failure("fstat", path);
    if (!S_ISREG(info.st_mode)) return damaged(path, "not a regular file");
    const auto file_size = static_cast<std::uint64_t>(info.st_size);
    if (file_size < fixed_header_bytes) return damaged(path, "shorter than a blob header");

    std::array<unsigned char, fixed_header_bytes> fixed{};
    PSYCH_TRY(read_at(fd.get(), path, reinterpret_cast<char*>(fixed.data()), fixed.size(), 0));
    if (std::memcmp(fixed.data(), magic.data(), magic.size()) != 0) return damaged(path, "bad magic (not a blob)");
    const std::uint64_t size = boost::endian::load_little_u64(fixed.data() + 8);
    const std::uint16_t type_bytes = boost::endian::load_little_u16(fixed.data() + 16);
    if (type_bytes > max_content_type_bytes) return damaged(path, "content type longer than the cap");
    const std::uint64_t content_offset = fixed_header_bytes + type_bytes;
    if (file_size < content_offset || file_size - content_offset != size)
      return damaged(path, fmt::format("{} bytes on disk, the header says {} of content", file_size, size));

    std::string content_type(type_bytes, '\0');
    PSYCH_TRY(read_at(fd.get(), path, content_type.data(), content_type.size(), fixed_header_bytes));
    return std::optional<open_blob>{
        open_blob{std::move(fd), blob_info{std::string{handle_prefix} + digest, std::move(content_type), size},
                  content_offset}};
  }

  /// The stored blob when it is whole and `size` bytes long, with its mtime refreshed; nothing when
  /// it is absent or damaged (the caller then writes it afresh).
  static result<std::optional<blob_info>> keep_existing(int dir_fd, const std::string& dir_path,
                                                        const std::string& digest, std::uint64_t size) {
    auto existing = open_existing(dir_fd, dir_path, digest);
    if (!existing) {
      if (existing.error().kind == error_kind::blob_store_failed) return std::optional<blob_info>{};
      return existing.as_failure();
    }
    if (!existing.value() || existing.value()->info.size_bytes != size) return std::optional<blob_info>{};
    if (::futimens(existing.value()->fd.get(), nullptr) != 0)
      return syscall_failure("futimens", fmt::format("{}/{}", dir_path, digest));
    return std::optional<blob_info>{std::move(existing.value()->info)};
  }

  static result<temp_file> create_temp(int dir_fd, const std::string& dir_path) {
    for (int attempt = 0; attempt < 16; ++attempt) {
      std::string name = std::string{temp_prefix} + random_hex(8);
      const int fd = ::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd >= 0) return temp_file{dir_fd, std::move(name), unique_fd{fd}};
      if (errno != EEXIST) return syscall_failure("openat", fmt::format("{}/{}", dir_path, name));
    }
    return failure(error_kind::blob_store_failed, fmt::format("{}: no free temporary file name", dir_path));
  }

  result<std::uint64_t> sweep_tenant(int dir_fd, const std::string& dir_path,
                                     std::chrono::system_clock::time_point now) const {
    struct kept_blob {
      std::chrono::system_clock::time_point mtime;
      std::string name;
      std::uint64_t bytes;
    };
    PSYCH_TRY(auto names, names_in(dir_fd, dir_path));
    std::vector<kept_blob> kept;
    std::uint64_t removed = 0;
    const auto unlink_entry = [&](const std::string& name) -> result<void> {
      if (::unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT)
        return syscall_failure("unlinkat", fmt::format("{}/{}", dir_path, name));
      return success();
    };
    for (const auto& name : names) {
      struct stat info {};
      if (::fstatat(dir_fd, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;  // a concurrent sweep or rename took it
        return syscall_failure("fstatat", fmt::format("{}/{}", dir_path, name));
      }
      if (!S_ISREG(info.st_mode)) continue;
      const auto age = now - mtime_of(info);
      if (name.starts_with(temp_prefix)) {
        if (age > stale_temp_age) {  // a put that crashed before its rename
          PSYCH_TRY(unlink_entry(name));
        }
      } else if (is_lower_hex(name, digest_hex_digits)) {
        if (age > retention_.max_age) {
          PSYCH_TRY(unlink_entry(name));
          ++removed;
        } else {
          kept.push_back({mtime_of(info), name, static_cast<std::uint64_t>(info.st_size)});
        }
      }
    }
    std::uint64_t held = 0;
    for (const auto& blob : kept) held += blob.bytes;
    std::sort(kept.begin(), kept.end(),
              [](const kept_blob& a, const kept_blob& b) { return std::tie(a.mtime, a.name) < std::tie(b.mtime, b.name); });
    for (const auto& blob : kept) {
      if (held <= retention_.max_tenant_bytes) break;
      PSYCH_TRY(unlink_entry(blob.name));
      held -= blob.bytes;
      ++removed;
    }
    return removed;
  }

  std::string root_;
  unique_fd root_fd_;
  blob_retention retention_;
};

/// Creates `root` and any missing parents, each mode 0700.
result<void> make_directories(const std::string& root) {
  for (std::size_t at = root.find('/', 1);; at = root.find('/', at + 1)) {
    const std::string prefix = root.substr(0, at);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST)
      return syscall_failure("mkdir", prefix);
    if (at == std::string::npos) return success();
  }
}

}  // namespace

result<std::unique_ptr<directory_blob_store>> open_directory_blob_store(const std::string& root,
                                                                        blob_retention retention) {
  if (root.empty() || root.find('\0') != std::string::npos)
    return failure(error_kind::invalid_argument, "blob store root: an empty path or one with a NUL byte");
  if (retention.max_age <= std::chrono::seconds::zero())
    return failure(error_kind::invalid_limit, fmt::format("blob retention max_age: {}s", retention.max_age.count()));
  if (retention.max_tenant_bytes == 0) return failure(error_kind::invalid_limit, "blob retention max_tenant_bytes: 0");
  PSYCH_TRY(make_directories(root));
  unique_fd fd{::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (fd.get() < 0) return syscall_failure("open", root);
  return std::unique_ptr<directory_blob_store>{
      std::make_unique<file_blob_store>(root, std::move(fd), retention)};
}

}  // namespace psych
