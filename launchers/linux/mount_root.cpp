#include "mount_root.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>

namespace psych::launcher {

namespace {

constexpr auto filesystem_stage = launch_stage::filesystem;
constexpr const char* old_root = "/.old-root";
constexpr const char* devices[] = {"null", "zero", "full", "random", "urandom"};
// Top-level names a merged-/usr host keeps as symlinks into /usr, or as real library directories.
constexpr const char* top_level_links[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"};

std::string real_path(const std::string& path) {
  char resolved[PATH_MAX];
  return ::realpath(path.c_str(), resolved) ? std::string(resolved) : path;
}

std::string parent_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

/// The interpreter's installation prefix: /usr for /usr/bin/python3.11.
std::string prefix_of(const std::string& interpreter) { return parent_of(parent_of(real_path(interpreter))); }

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// Every missing directory of `path`, trying the deepest first: inside the new root most parents
/// already exist, and every component above the root always does.
setup_result<void> make_directories(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return success();
  if (errno != ENOENT) return fail(system_failure(filesystem_stage, "mkdir", errno, path));
  PSYCH_TRY(make_directories(parent_of(path)));
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return fail(system_failure(filesystem_stage, "mkdir", errno, path));
  return success();
}

setup_result<void> make_file(const std::string& path) {
  PSYCH_TRY(make_directories(parent_of(path)));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return fail(system_failure(filesystem_stage, "open", errno, path));
  ::close(fd);
  return success();
}

setup_result<void> mount_call(const char* source, const std::string& target, const char* type,
                              unsigned long flags, const char* data = nullptr) {
  if (::mount(source, target.c_str(), type, flags, data) != 0)
    return fail(system_failure(filesystem_stage, "mount", errno,
                               fmt::format("{}, {}, {}, {:#x}", source ? source : "NULL", target,
                                           type ? type : "NULL", flags)));
  return success();
}

/// A mount made in a user namespace must keep the restrictions the host mount it copies has (the
/// kernel locks them), so the remount repeats them and adds nosuid and nodev.
unsigned long locked_flags_of(const std::string& path) {
  struct statvfs fs {};
  if (::statvfs(path.c_str(), &fs) != 0) return 0;
  unsigned long flags = 0;
  if (fs.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
  if (fs.f_flag & ST_NOATIME) flags |= MS_NOATIME;
  if (fs.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
  if (fs.f_flag & ST_RELATIME) flags |= MS_RELATIME;
  return flags | MS_NOSUID | MS_NODEV;
}

setup_result<void> bind_mount(const std::string& host, const std::string& target, bool read_only,
                        unsigned long extra = 0) {
  PSYCH_TRY(mount_call(host.c_str(), target, nullptr, MS_BIND | MS_REC));
  const unsigned long flags = locked_flags_of(host) | extra;
  PSYCH_TRY(mount_call(nullptr, target, nullptr,
                       MS_BIND | MS_REMOUNT | flags | (read_only ? static_cast<unsigned long>(MS_RDONLY) : 0UL)));
  if (!read_only) return success();
  // A remount changes only the top mount; a host mount nested below it (a separate /usr/local,
  // say) would stay writable. mount_setattr(AT_RECURSIVE) covers the whole subtree (Linux 5.12).
  mount_attr attributes{.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
  if (::syscall(SYS_mount_setattr, AT_FDCWD, target.c_str(), AT_RECURSIVE, &attributes, sizeof attributes) != 0 &&
      errno != ENOSYS)
    return fail(system_failure(filesystem_stage, "mount_setattr", errno, target + ", AT_RECURSIVE, RDONLY|NOSUID|NODEV"));
  return success();
}

setup_result<void> bind_directory(const std::string& root, const std::string& host, const std::string& inside,
                                  bool read_only) {
  PSYCH_TRY(make_directories(root + inside));
  return bind_mount(host, root + inside, read_only);
}

setup_result<void> replicate_top_level(const std::string& root, const std::vector<std::string>& bound) {
  for (const char* name : top_level_links) {
    const std::string host = std::string("/") + name;
    struct stat st {};
    if (::lstat(host.c_str(), &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      const ssize_t n = ::readlink(host.c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      if (::symlink(std::string(target, static_cast<std::size_t>(n)).c_str(), (root + host).c_str()) != 0)
        return fail(system_failure(filesystem_stage, "symlink", errno, root + host));
    } else if (S_ISDIR(st.st_mode) && std::string_view(name).starts_with("lib") &&
               std::find(bound.begin(), bound.end(), host) == bound.end()) {
      PSYCH_TRY(bind_directory(root, host, host, true));
    }
  }
  return success();
}

setup_result<void> build_dev(const std::string& root) {
  const std::string dev = root + "/dev";
  PSYCH_TRY(make_directories(dev));
  PSYCH_TRY(mount_call("psych-dev", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64"));
  for (const char* name : devices) {
    const std::string node = dev + "/" + name;
    PSYCH_TRY(make_file(node));
    PSYCH_TRY(mount_call((std::string("/dev/") + name).c_str(), node, nullptr, MS_BIND));
    PSYCH_TRY(mount_call(nullptr, node, nullptr, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NOEXEC));
  }
  const std::pair<const char*, const char*> links[] = {
      {"fd", "/proc/self/fd"}, {"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"}};
  for (const auto& [name, target] : links)
    if (::symlink(target, (dev + "/" + name).c_str()) != 0)
      return fail(system_failure(filesystem_stage, "symlink", errno, dev + "/" + name));
  return mount_call(nullptr, dev, nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64");
}

/// The host directories bound read-only for the interpreter: its prefix, and /usr/lib and
/// /usr/lib64 when the prefix is elsewhere (the C library lives there on a merged-/usr host).
std::vector<std::string> interpreter_binds(const root_plan& plan) {
  std::vector<std::string> binds{prefix_of(plan.interpreter)};
  if (binds.front() != "/usr")
    for (const char* lib : {"/usr/lib", "/usr/lib64"})
      if (is_directory(lib)) binds.emplace_back(lib);
  return binds;
}

std::string top_of(const std::string& path) {
  const auto next = path.find('/', 1);
  return path.substr(1, next == std::string::npos ? std::string::npos : next - 1);
}

}  // namespace

std::vector<std::string> root_entries(const root_plan& plan) {
  std::vector<std::string> names{"dev", "proc", "tmp", top_of(sandbox_workspace)};
  for (const auto& path : interpreter_binds(plan)) names.push_back(top_of(path));
  for (const char* name : top_level_links)
    if (::access((std::string("/") + name).c_str(), F_OK) == 0) names.emplace_back(name);
  if (::access("/etc/ld.so.cache", R_OK) == 0) names.emplace_back("etc");
  if (!plan.cgroup_dirs.empty()) names.emplace_back("sys");
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::vector<std::string> read_only_binds(const root_plan& plan) {
  auto paths = interpreter_binds(plan);
  for (const char* name : top_level_links) {
    const std::string host = std::string("/") + name;
    if (std::string_view(name).starts_with("lib") && is_directory(host)) paths.push_back(host);
  }
  if (::access("/etc/ld.so.cache", R_OK) == 0) paths.emplace_back("/etc/ld.so.cache");
  return paths;
}

setup_result<void> enter_minimal_root(const root_plan& plan) {
  // Nothing below may propagate back to the host's mounts.
  PSYCH_TRY(mount_call(nullptr, "/", nullptr, MS_REC | MS_PRIVATE));
  const std::string& root = plan.mount_point;
  PSYCH_TRY(mount_call("psych-root", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=1024"));

  const auto binds = interpreter_binds(plan);
  for (const auto& path : binds) {
    PSYCH_TRY(bind_directory(root, path, path, true));
  }
  PSYCH_TRY(replicate_top_level(root, binds));
  if (::access("/etc/ld.so.cache", R_OK) == 0) {
    PSYCH_TRY(make_file(root + "/etc/ld.so.cache"));
    PSYCH_TRY(bind_mount("/etc/ld.so.cache", root + "/etc/ld.so.cache", true));
  }
  PSYCH_TRY(bind_directory(root, plan.workspace, sandbox_workspace, false));
  PSYCH_TRY(make_directories(root + sandbox_tmp));
  PSYCH_TRY(mount_call("psych-tmp", root + sandbox_tmp, "tmpfs", MS_NOSUID | MS_NODEV,
                       fmt::format("mode=1777,size={},nr_inodes={}", plan.tmp_bytes, plan.tmp_inodes).c_str()));
  PSYCH_TRY(make_directories(root + "/proc"));
  PSYCH_TRY(mount_call("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC));
  PSYCH_TRY(build_dev(root));
  for (const auto& dir : plan.cgroup_dirs) {
    PSYCH_TRY(bind_directory(root, dir.host, dir.inside, true));
  }

  PSYCH_TRY(make_directories(root + old_root));
  if (::syscall(SYS_pivot_root, root.c_str(), (root + old_root).c_str()) != 0)
    return fail(system_failure(filesystem_stage, "pivot_root", errno, root));
  if (::chdir("/") != 0) return fail(system_failure(filesystem_stage, "chdir", errno, "/"));
  if (::umount2(old_root, MNT_DETACH) != 0) return fail(system_failure(filesystem_stage, "umount2", errno, old_root));
  if (::rmdir(old_root) != 0) return fail(system_failure(filesystem_stage, "rmdir", errno, old_root));
  return mount_call(nullptr, "/", nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV);
}

}  // namespace psych::launcher
