#include "backends/uid_pool.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __APPLE__
#include <sys/sysctl.h>  // the process table: there is no /proc
#endif

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "execution/execution_dirs.hpp"

namespace psych::host {
namespace {

namespace fs = std::filesystem;

/// The largest id setresuid can take ((uid_t)-1 means "unchanged").
constexpr std::int64_t id_max = 0xfffffffeLL;

/// How long release() waits for processes that are still dying before it holds the uid back.
constexpr auto dying_grace = std::chrono::milliseconds(500);

bool uses(const std::vector<std::int64_t>& ids, std::int64_t id) {
  return std::binary_search(ids.begin(), ids.end(), id);
}

/// The lock directory, made if missing, and refused where somebody else could plant or hold
/// lock files: it must be a directory (not a symlink) of the worker's, writable by nobody else.
result<void> check_lock_dir(const std::string& dir) {
  if (dir.empty() || dir.front() != '/')
    return fail_with(error_kind::invalid_argument, fmt::format("run_as_range.lock_dir {:?} is not absolute", dir));
  std::error_code ec;
  if (fs::create_directories(dir, ec) && !ec) fs::permissions(dir, fs::perms::owner_all, ec);
  if (ec)
    return fail_with(error_kind::sandbox_setup,
                   fmt::format("run_as_range.lock_dir {}: {}; make it (root, 0700) or name another", dir,
                               ec.message()));
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0)
    return fail_with(error_kind::sandbox_setup, fmt::format("run_as_range.lock_dir {}: {}", dir, std::strerror(errno)));
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return fail_with(error_kind::sandbox_setup,
                   fmt::format("run_as_range.lock_dir {} must be a directory owned by uid {} that nobody else may "
                               "write (it is mode {:04o}, owner {}{}); another account could hold or replace "
                               "the locks there",
                               dir, ::geteuid(), st.st_mode & 07777u, st.st_uid,
                               S_ISLNK(st.st_mode) ? ", a symlink" : ""));
  return success();
}

/// Tries a lock without waiting. True: taken; false: somebody holds it (or it cannot be opened).
bool try_lock(int fd, int how) {
  while (::flock(fd, how | LOCK_NB) != 0)
    if (errno != EINTR) return false;
  return true;
}

void mark(int fd, std::string_view text) {
  if (::ftruncate(fd, 0) == 0 && !text.empty()) (void)::pwrite(fd, text.data(), text.size(), 0);
}

bool marked(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && st.st_size > 0;
}

}  // namespace

#ifdef __APPLE__
std::vector<std::int64_t> ids_in_use() {
  // No /proc: the kernel's process table, every real, effective and saved id of each process.
  std::vector<std::int64_t> ids;
  int mib[3] = {CTL_KERN, KERN_PROC, KERN_PROC_ALL};
  std::vector<kinfo_proc> table;
  for (int attempt = 0; attempt < 8; ++attempt) {
    size_t size = 0;
    if (::sysctl(mib, 3, nullptr, &size, nullptr, 0) != 0) return ids;
    table.resize(size / sizeof(kinfo_proc) + 16);
    size = table.size() * sizeof(kinfo_proc);
    if (::sysctl(mib, 3, table.data(), &size, nullptr, 0) == 0) {
      table.resize(size / sizeof(kinfo_proc));
      break;
    }
    if (errno != ENOMEM) return ids;
    table.clear();
  }
  for (const auto& process : table) {
    const auto& cred = process.kp_eproc.e_pcred;
    const auto& ucred = process.kp_eproc.e_ucred;
    for (const std::int64_t id : {std::int64_t{cred.p_ruid}, std::int64_t{cred.p_svuid}, std::int64_t{ucred.cr_uid},
                                  std::int64_t{cred.p_rgid}, std::int64_t{cred.p_svgid},
                                  std::int64_t{ucred.cr_ngroups > 0 ? ucred.cr_groups[0] : cred.p_rgid}})
      ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}
#else
std::vector<std::int64_t> ids_in_use() {
  // Every execution reads this (acquire and release), so it reads each status file with one
  // read() into a buffer rather than through iostreams: the cost is the kernel's text, not ours.
  std::vector<std::int64_t> ids;
  const std::unique_ptr<DIR, int (*)(DIR*)> proc(::opendir("/proc"), &::closedir);
  if (!proc) return ids;
  char text[4096];
  while (const dirent* entry = ::readdir(proc.get())) {
    const std::string_view name = entry->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string_view::npos) continue;
    char path[sizeof "/proc/" + sizeof entry->d_name + sizeof "/status"];  // room for any name
    std::snprintf(path, sizeof path, "/proc/%s/status", entry->d_name);
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // gone since the listing
    const ssize_t n = ::read(fd, text, sizeof text - 1);
    ::close(fd);
    if (n <= 0) continue;
    const std::string_view status(text, static_cast<std::size_t>(n));
    for (const std::string_view key : {"\nUid:", "\nGid:"}) {
      const auto at = status.find(key);
      if (at == std::string_view::npos) continue;
      const auto end = status.find('\n', at + key.size());
      std::string_view fields = status.substr(at + key.size(), end == std::string_view::npos ? end : end - at - key.size());
      while (!fields.empty()) {
        const auto start = fields.find_first_not_of(" \t");
        if (start == std::string_view::npos) break;
        fields.remove_prefix(start);
        std::int64_t id = 0;
        const auto [next, ec] = std::from_chars(fields.data(), fields.data() + fields.size(), id);
        if (ec != std::errc{}) break;
        ids.push_back(id);
        fields.remove_prefix(static_cast<std::size_t>(next - fields.data()));
      }
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}
#endif

// ---- uid_lease ----------------------------------------------------------------------------

uid_lease::uid_lease(uid_lease&& other) noexcept
    : pool_(std::move(other.pool_)), uid_(other.uid_), gid_(other.gid_), exclusive_(other.exclusive_), fd_(std::exchange(other.fd_, -1)) {}

uid_lease::~uid_lease() { (void)release(); }

std::optional<std::string> uid_lease::release() {
  if (fd_ < 0 || !pool_) return std::nullopt;
  return pool_->let_go(uid_, std::exchange(fd_, -1));
}

// ---- uid_pool -----------------------------------------------------------------------------

result<std::shared_ptr<uid_pool>> uid_pool::per_execution(const uid_range& range) {
  if (range.first <= 0 || range.count <= 0 || range.first > id_max - (range.count - 1))
    return fail_with(error_kind::invalid_argument,
                   fmt::format("run_as_range {{first {}, count {}}} must be at least one uid, above 0 and below {}",
                               range.first, range.count, id_max + 1));
  if (::geteuid() >= static_cast<uid_t>(range.first) &&
      ::geteuid() <= static_cast<uid_t>(range.first + range.count - 1))
    return fail_with(error_kind::invalid_argument,
                   fmt::format("run_as_range {}..{} holds the worker's own uid {}", range.first,
                               range.first + range.count - 1, ::geteuid()));
  PSYCH_TRY(check_lock_dir(range.lock_dir));
  return std::shared_ptr<uid_pool>(new uid_pool(true, range.first, range.first, range.count, range.lock_dir));
}

result<std::shared_ptr<uid_pool>> uid_pool::shared(std::int64_t uid, std::int64_t gid, const std::string& lock_dir) {
  if (uid <= 0 || gid <= 0 || uid > id_max || gid > id_max)
    return fail_with(error_kind::invalid_argument,
                   fmt::format("run_as {}:{} must be a uid and gid above 0 (never root) and below {}", uid, gid,
                               id_max + 1));
  PSYCH_TRY(check_lock_dir(lock_dir));
  return std::shared_ptr<uid_pool>(new uid_pool(false, uid, gid, 1, lock_dir));
}

uid_pool::~uid_pool() {
  // Held-back uids stay marked unclean: whoever takes one next sweeps it first.
  for (const auto& back : held_back_) ::close(back.fd);
}

std::string uid_pool::lock_path(std::int64_t uid) const { return fmt::format("{}/{}.lock", lock_dir_, uid); }

void uid_pool::retry_held_back() {
  if (held_back_.empty()) return;
  const auto in_use = ids_in_use();
  std::erase_if(held_back_, [&](const held_back& back) {
    if (uses(in_use, back.uid)) return false;
    sweep_shared_temp(back.uid);
    mark(back.fd, "");
    ::close(back.fd);
    return true;
  });
}

result<uid_lease> uid_pool::acquire() {
  const int mode = O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW;
  if (!per_execution_) {
    const int fd = ::open(lock_path(first_).c_str(), mode, 0600);
    if (fd < 0)
      return fail_with(error_kind::system_call_failed,
                     fmt::format("open({}): {}", lock_path(first_), std::strerror(errno)));
    if (!try_lock(fd, LOCK_SH)) {
      ::close(fd);
      return fail_with(error_kind::sandbox_setup,
                     fmt::format("run_as uid {} is held alone by an execution of a worker that allocates it from "
                                 "its run_as_range ({}); nothing ran. Pick a run_as_uid outside every range",
                                 first_, lock_path(first_)));
    }
    return uid_lease(shared_from_this(), first_, gid_first_, false, fd);
  }

  std::lock_guard guard(mutex_);
  retry_held_back();
  const auto in_use = ids_in_use();
  std::int64_t held = 0, stray = 0;
  for (std::int64_t step = 0; step < count_; ++step) {
    const auto offset = (cursor_ + step) % count_;
    const auto uid = first_ + offset;
    const int fd = ::open(lock_path(uid).c_str(), mode, 0600);
    if (fd < 0)
      return fail_with(error_kind::system_call_failed, fmt::format("open({}): {}", lock_path(uid), std::strerror(errno)));
    if (!try_lock(fd, LOCK_EX)) {
      ::close(fd);
      ++held;
      continue;
    }
    if (uses(in_use, uid) || uses(in_use, gid_first_ + offset)) {
      ::close(fd);  // a process of it lives that no lock accounts for: not ours to share
      ++stray;
      continue;
    }
    if (marked(fd)) sweep_shared_temp(uid);  // its last holder never let it go cleanly
    mark(fd, fmt::format("held by pid {}\n", ::getpid()));
    cursor_ = (offset + 1) % count_;
    return uid_lease(shared_from_this(), uid, gid_first_ + offset, true, fd);
  }
  return fail_with(error_kind::sandbox_setup,
                 fmt::format("run_as_range {}..{} is exhausted: {} uid(s) held by running executions, {} used by "
                             "live processes that hold no lock; nothing ran. Run fewer executions at once or widen "
                             "run_as_range",
                             first_, first_ + count_ - 1, held, stray));
}

std::optional<std::string> uid_pool::let_go(std::int64_t uid, int fd) {
  if (!per_execution_) {
    ::close(fd);  // a shared uid: the session swept what it could; its neighbours are the warned-of risk
    return std::nullopt;
  }
  const auto deadline = std::chrono::steady_clock::now() + dying_grace;
  auto in_use = ids_in_use();
  while (uses(in_use, uid) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    in_use = ids_in_use();
  }
  if (uses(in_use, uid)) {
    std::lock_guard guard(mutex_);
    held_back_.push_back({uid, fd});
    return fmt::format("identity: processes of uid {} outlived the execution; the uid is held back from other "
                       "executions until they are gone",
                       uid);
  }
  // Dead: what it left in /tmp and the like can no longer change, so one sweep is complete.
  sweep_shared_temp(uid);
  mark(fd, "");
  ::close(fd);
  return std::nullopt;
}

run_as_report uid_pool::report() {
  run_as_report r{.mode = per_execution_ ? run_as_mode::per_execution : run_as_mode::shared,
                  .first = first_,
                  .count = count_,
                  .free = 0,
                  .held = 0,
                  .stray = 0,
                  .lock_dir = lock_dir_};
  const auto in_use = ids_in_use();
  for (std::int64_t offset = 0; offset < count_; ++offset) {
    const auto uid = first_ + offset;
    // Only an existing lock file can be held. A shared probe never conflicts with a shared
    // holder; an allocator that tries the uid in this very instant moves on to the next one.
    bool locked = false;
    const int fd = ::open(lock_path(uid).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
      locked = !try_lock(fd, LOCK_SH);
      ::close(fd);
    }
    if (locked) ++r.held;
    else if (uses(in_use, uid) || uses(in_use, gid_first_ + offset)) ++r.stray;
    else ++r.free;
  }
  return r;
}

}  // namespace psych::host
