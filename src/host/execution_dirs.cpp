#include "execution_dirs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include <fmt/format.h>

namespace psych::host {
namespace {

namespace fs = std::filesystem;

result<std::string> make_temp_dir(const std::string& root, const char* prefix, mode_t mode) {
  std::string pattern = fmt::format("{}/{}XXXXXX", root, prefix);
  if (::mkdtemp(pattern.data()) == nullptr)
    return failure(error_kind::system_call_failed, fmt::format("mkdtemp({}): {}", pattern, std::strerror(errno)));
  if (::chmod(pattern.c_str(), mode) != 0)
    return failure(error_kind::system_call_failed, fmt::format("chmod({}): {}", pattern, std::strerror(errno)));
  return pattern;
}

result<void> make_dir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) != 0 || ::chmod(path.c_str(), mode) != 0)
    return failure(error_kind::system_call_failed, fmt::format("mkdir({}): {}", path, std::strerror(errno)));
  return success();
}

std::string random_hex(std::size_t bytes) {
  std::random_device entropy;
  std::string out;
  for (std::size_t i = 0; i < bytes; ++i) out += fmt::format("{:02x}", entropy() & 0xffu);
  return out;
}

/// remove_all does not follow symlinks, but a program can leave directories
/// it made unwritable (mode 000); open them up and try again.
void remove_tree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (!ec || !fs::exists(fs::symlink_status(path, ec))) return;
  for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec))
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add | fs::perm_options::nofollow, ec);
  }
  fs::permissions(path, fs::perms::owner_all, fs::perm_options::add | fs::perm_options::nofollow, ec);
  fs::remove_all(path, ec);
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
    remove_tree(dirs.base);
    return canary_dir.error();
  }
  dirs.canary_dir = canary_dir.value();
  dirs.canary = dirs.canary_dir + "/canary";
  const int fd = ::open(dirs.canary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  const auto content = "psych canary " + random_hex(16) + "\n";
  if (fd < 0 || ::write(fd, content.data(), content.size()) != static_cast<ssize_t>(content.size())) {
    const auto why = fmt::format("writing the canary {}: {}", dirs.canary, std::strerror(errno));
    if (fd >= 0) ::close(fd);
    remove_execution_dirs(dirs);
    return failure(error_kind::system_call_failed, why);
  }
  ::close(fd);
  return dirs;
}

void remove_execution_dirs(const execution_dirs& dirs) {
  if (!dirs.base.empty()) remove_tree(dirs.base);
  if (!dirs.canary_dir.empty()) remove_tree(dirs.canary_dir);
}

void sweep_shared_temp(std::int64_t uid) {
  for (const char* shared : {"/tmp", "/var/tmp", "/dev/shm"}) {
    std::error_code ec;
    for (auto it = fs::directory_iterator(shared, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      struct stat st {};
      if (::lstat(it->path().c_str(), &st) == 0 && static_cast<std::int64_t>(st.st_uid) == uid)
        remove_tree(it->path().string());
    }
  }
}

}  // namespace psych::host
