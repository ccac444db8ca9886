#include "execution/execution_dirs.hpp"

#include "os/posix.hpp"
#include "os/random_hex.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>
#include <stdio.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace psych::host {
namespace {

namespace fs = std::filesystem;

result<std::string> make_temp_dir(const std::string& root, const char* prefix, mode_t mode) {
  std::string pattern = fmt::format("{}/{}XXXXXX", root, prefix);
  if (::mkdtemp(pattern.data()) == nullptr)
    return fail_with(error_kind::system_call_failed, fmt::format("mkdtemp({}): {}", pattern, std::strerror(errno)));
  if (::chmod(pattern.c_str(), mode) != 0)
    return fail_with(error_kind::system_call_failed, fmt::format("chmod({}): {}", pattern, std::strerror(errno)));
  return pattern;
}

result<void> make_dir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) != 0 || ::chmod(path.c_str(), mode) != 0)
    return fail_with(error_kind::system_call_failed, fmt::format("mkdir({}): {}", path, std::strerror(errno)));
  return success();
}

/// Names in a directory, by descriptor (a fresh handle each time: the caller
/// changes the directory between reads).
std::vector<std::string> entries_of(int dir) {
  std::vector<std::string> names;
  const int handle = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (handle < 0) return names;
  DIR* stream = ::fdopendir(handle);
  if (stream == nullptr) {
    ::close(handle);
    return names;
  }
  while (const dirent* entry = ::readdir(stream)) {
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  ::closedir(stream);
  return names;
}

/// Removes a tree of any depth and any modes with a constant number of
/// descriptors, never following a symlink. Recursion (std::filesystem's
/// remove_all, nftw) holds a descriptor per level, so a program that nests
/// directories deeper than the worker's open-file limit would leave its
/// workspace behind. Instead, every directory found one level down is moved
/// up to the top (renameat2 with RENAME_NOREPLACE, same filesystem), so the
/// tree flattens until each entry can be unlinked where it stands.
bool remove_tree(const std::string& path) {
  const int top = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (top < 0) return ::unlink(path.c_str()) == 0 || errno == ENOENT;  // a file or a symlink
  ::fchmod(top, 0700);  // the program may have made it unreadable; owner and root can undo that
  std::uint64_t moved = 0;
  for (;;) {
    const auto names = entries_of(top);
    if (names.empty()) break;
    bool progress = false;
    for (const auto& name : names) {
      if (::unlinkat(top, name.c_str(), 0) == 0 || ::unlinkat(top, name.c_str(), AT_REMOVEDIR) == 0) {
        progress = true;
        continue;
      }
      const int sub = ::openat(top, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) continue;
      ::fchmod(sub, 0700);
      for (const auto& inner : entries_of(sub)) {
        if (::unlinkat(sub, inner.c_str(), 0) == 0) {
          progress = true;
          continue;
        }
        for (;;) {  // a directory: up one level, under a name nobody uses yet
          const auto flat = fmt::format(".psych-flat-{}", moved++);
          if (rename_no_replace(sub, inner.c_str(), top, flat.c_str()) == 0) {
            progress = true;
            break;
          }
          if (errno != EEXIST) break;
        }
      }
      ::close(sub);
    }
    if (!progress) break;  // nothing more can be removed: leave the rest, and say so below
  }
  ::close(top);
  return ::rmdir(path.c_str()) == 0 || errno == ENOENT;
}

}  // namespace

result<execution_dirs> make_execution_dirs(const std::string& temp_root) {
  execution_dirs dirs;
  PSYCH_TRY(auto base, make_temp_dir(temp_root, "psych-", 0711));
  dirs.base = base;
  dirs.workspace = base + "/workspace";
  dirs.tmp = base + "/tmp";
  auto made = make_dir(dirs.workspace, 0700);
  if (made) made = make_dir(dirs.tmp, 0700);
  auto canary_dir = made ? make_temp_dir(temp_root, "psych-canary-", 0700) : result<std::string>(made.error());
  if (!canary_dir) {
    (void)remove_execution_dirs(dirs);
    return canary_dir.error();
  }
  dirs.canary_dir = canary_dir.value();
  dirs.canary = dirs.canary_dir + "/canary";
  const int fd = ::open(dirs.canary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  const auto content = "psych canary " + random_hex(16) + "\n";
  if (fd < 0 || ::write(fd, content.data(), content.size()) != static_cast<ssize_t>(content.size())) {
    const auto why = fmt::format("writing the canary {}: {}", dirs.canary, std::strerror(errno));
    if (fd >= 0) ::close(fd);
    (void)remove_execution_dirs(dirs);
    return fail_with(error_kind::system_call_failed, why);
  }
  ::close(fd);
  return dirs;
}

bool remove_execution_dirs(const execution_dirs& dirs) {
  // The skeleton this file made is removed by name first, which needs no descriptor: a launch
  // that failed because the worker ran out of descriptors still leaves nothing behind. Only
  // what the program added (which makes these calls fail harmlessly) needs the walk below.
  if (!dirs.canary.empty()) ::unlink(dirs.canary.c_str());
  if (!dirs.canary_dir.empty()) ::rmdir(dirs.canary_dir.c_str());
  if (!dirs.base.empty()) {
    ::rmdir(dirs.workspace.c_str());
    ::rmdir(dirs.tmp.c_str());
    ::rmdir(dirs.base.c_str());
  }
  const bool base = dirs.base.empty() || remove_tree(dirs.base);
  const bool canary = dirs.canary_dir.empty() || remove_tree(dirs.canary_dir);
  return base && canary;
}

void sweep_shared_temp(std::int64_t uid) {
  if (uid == 0 || uid == static_cast<std::int64_t>(::geteuid()) || uid == static_cast<std::int64_t>(::getuid())) return;
  for (const char* shared : {"/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue"}) {
    std::error_code ec;
    for (auto it = fs::directory_iterator(shared, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      struct stat st {};
      if (::lstat(it->path().c_str(), &st) == 0 && static_cast<std::int64_t>(st.st_uid) == uid)
        remove_tree(it->path().string());
    }
  }
}

}  // namespace psych::host
