// artifact_walk.hpp on POSIX: openat2 beneath the workspace on Linux, openat with O_NOFOLLOW_ANY
// on macOS; what is kept is artifact_harvest.hpp's decision.
#include "execution/artifact_walk.hpp"

#include "execution/artifact_harvest.hpp"
#include "os/posix.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/openat2.h>
#include <sys/syscall.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace psych::host {
namespace {

#ifdef __linux__
/// Every open below the workspace: one name relative to a directory fd, never through a symlink
/// (the last component included), never across a mount, never out of the directory.
constexpr std::uint64_t resolve_beneath =
    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
#endif

/// openat2 of one name beneath `dir`; O_NOFOLLOW | O_CLOEXEC are always added. On failure the fd
/// is invalid and errno says why (ELOOP: the name is a symlink).
unique_fd open_beneath(int dir, const char* name, std::uint64_t flags) {
#ifndef __linux__
  // Without openat2 (macOS): the walk only ever opens one name read from its directory, never
  // "." or "..", so openat() cannot leave the directory; O_NOFOLLOW_ANY refuses a symlink in
  // any component. What this does not refuse is crossing onto another mount (docs/macos-launcher.md).
  if (std::string_view(name).find('/') != std::string_view::npos) {
    errno = EINVAL;
    return unique_fd();
  }
  for (;;) {
    const int fd = ::openat(dir, name, static_cast<int>(flags) | O_NOFOLLOW | O_NOFOLLOW_ANY | O_CLOEXEC);
    if (fd >= 0) return unique_fd(fd);
    if (errno == EINTR) continue;
    return unique_fd();
  }
#else
  open_how how{};
  how.flags = flags | O_NOFOLLOW | O_CLOEXEC;
  how.resolve = resolve_beneath;
  // EAGAIN: a concurrent rename made the kernel give up on a RESOLVE_BENEATH walk; worth a retry.
  for (int attempt = 0;; ++attempt) {
    const long fd = ::syscall(SYS_openat2, dir, name, &how, sizeof how);
    if (fd >= 0) return unique_fd(static_cast<int>(fd));
    if (errno == EINTR || (errno == EAGAIN && attempt < 3)) continue;
    return unique_fd();
  }
#endif
}

/// The kind of one entry, without opening what it names: an O_PATH descriptor where there is one,
/// else fstatat() without following a symlink.
bool stat_beneath(int dir, const char* name, struct stat& st) {
#ifdef __linux__
  const unique_fd path_only = open_beneath(dir, name, O_PATH);
  return path_only.valid() && ::fstat(path_only.get(), &st) == 0;
#else
  if (std::string_view(name).find('/') != std::string_view::npos) return false;
  return ::fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
#endif
}

class walker {
 public:
  explicit walker(const artifact_policy& policy) : kept_(policy) {}

  /// `dir` is an O_RDONLY directory fd; `prefix` is its workspace-relative path with a trailing
  /// '/' (empty for the workspace); `depth` counts its path components (0 for the workspace).
  void walk(int dir, const std::string& prefix, std::uint64_t depth) {
    // Sorted, so which files a limit leaves out does not depend on the directory's hash order.
    auto names = names_in(dir);
    std::ranges::sort(names);
    for (const auto& name : names) visit(dir, name, prefix + name, depth);
  }

  harvest take() && { return std::move(kept_).take(); }

 private:
  void omit(omission_reason why) { kept_.omit(why); }

  /// The names in `dir`, read through a descriptor of its own (readdir moves the offset).
  std::vector<std::string> names_in(int dir) {
    std::vector<std::string> names;
    const int copy = ::fcntl(dir, F_DUPFD_CLOEXEC, 0);
    DIR* stream = copy >= 0 ? ::fdopendir(copy) : nullptr;
    if (stream == nullptr) {
      if (copy >= 0) ::close(copy);
      omit(omission_reason::unreadable);
      return names;
    }
    ::rewinddir(stream);
    for (;;) {
      errno = 0;
      const dirent* entry = ::readdir(stream);
      if (entry == nullptr) {
        if (errno != 0) omit(omission_reason::unreadable);  // the rest of this directory is lost
        break;
      }
      const std::string_view name = entry->d_name;
      if (name != "." && name != "..") names.emplace_back(name);
    }
    ::closedir(stream);
    return names;
  }

  /// Opens one entry once, classifies it by fstat of that descriptor, then collects (reading that
  /// same descriptor), descends (walking it) or omits it: nothing is reached by its name twice, so
  /// nothing can be swapped in between a check and a use. O_NONBLOCK and O_NOCTTY keep whatever
  /// the name holds (a FIFO, a terminal) from holding the walk at open or read; a FIFO opened so is
  /// only fstat'ed. A device node's driver does see the open: creating one takes a privilege
  /// (CAP_MKNOD outside a user namespace) that a sandboxed program does not hold.
  void visit(int dir, const std::string& name, const std::string& path, std::uint64_t depth) {
    const unique_fd handle = open_beneath(dir, name.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY);
    if (!handle.valid()) return omit(unopenable(dir, name, errno));
    struct stat st {};
    if (::fstat(handle.get(), &st) != 0) return omit(omission_reason::unreadable);
    switch (st.st_mode & S_IFMT) {
      case S_IFCHR:
      case S_IFBLK: return omit(omission_reason::device);
      case S_IFIFO: return omit(omission_reason::fifo);
      case S_IFSOCK: return omit(omission_reason::socket);
      case S_IFDIR: return descend(handle.get(), path, depth + 1);
      case S_IFREG:
        if (st.st_nlink > 1) return omit(omission_reason::hardlink);
        return take_file(handle.get(), path, st);
      default: return omit(omission_reason::special);
    }
  }

  /// Why an entry that could not be opened for reading is omitted. ELOOP is a symlink. A socket
  /// cannot be opened at all (ENXIO), nor a device without a driver: an O_PATH descriptor, which
  /// opens nothing and reads nothing, says which kind it is, for the count alone.
  static omission_reason unopenable(int dir, const std::string& name, int why) {
    if (why == ELOOP) return omission_reason::symlink;
    struct stat st {};
    if (!stat_beneath(dir, name.c_str(), st)) return omission_reason::unreadable;
    switch (st.st_mode & S_IFMT) {
      case S_IFSOCK: return omission_reason::socket;
      case S_IFCHR:
      case S_IFBLK: return omission_reason::device;
      case S_IFIFO: return omission_reason::fifo;
      default: return omission_reason::unreadable;
    }
  }

  void descend(int sub, const std::string& path, std::uint64_t depth) {
    if (kept_.may_descend(depth)) walk(sub, path + "/", depth);
  }

  /// Reads the regular file `file` was classified as, from that descriptor.
  void take_file(int file, const std::string& path, const struct stat& classified) {
    kept_.take_file(path, static_cast<std::uint64_t>(classified.st_size),
                    [file](char* into, std::size_t want) -> std::optional<std::size_t> {
                      for (;;) {
                        const ssize_t got = ::read(file, into, want);
                        if (got >= 0) return static_cast<std::size_t>(got);
                        if (errno != EINTR) return std::nullopt;
                      }
                    });
  }

  harvester kept_;
};

}  // namespace

result<harvest> collect_artifacts(const std::string& workspace, const artifact_policy& policy) {
  if (policy.collection == artifact_collection::none) return harvest{};
  const unique_fd root(::open(workspace.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root.valid())
    return fail_with(error_kind::system_call_failed, fmt::format("open({}): {}", workspace, std::strerror(errno)));
#ifdef __linux__
  // Without openat2 (before Linux 5.6, or filtered) every entry would read as unreadable; say so.
  if (!open_beneath(root.get(), ".", O_PATH | O_DIRECTORY).valid())
    return fail_with(error_kind::system_call_failed,
                   fmt::format("openat2({}, RESOLVE_BENEATH): {}", workspace, std::strerror(errno)));
#endif
  walker walk(policy);
  walk.walk(root.get(), "", 0);
  return std::move(walk).take();
}

}  // namespace psych::host
