#include "os/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/syscall.h>  // pidfd_open, pidfd_send_signal
#else
#include <sys/event.h>  // kqueue: EVFILT_PROC, NOTE_EXIT
#endif
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace psych::host {
namespace {

/// posix_spawn attributes: a process group of its own, every signal at its default disposition
/// and an empty mask, whatever the host set for itself.
class own_group_attributes {
 public:
  own_group_attributes() {
    posix_spawnattr_init(&attributes_);
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attributes_, &all);
    posix_spawnattr_setsigmask(&attributes_, &none);
    posix_spawnattr_setpgroup(&attributes_, 0);
    int flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP;
#ifdef POSIX_SPAWN_CLOEXEC_DEFAULT
    // macOS: only the descriptors the file actions place cross into the child (Linux closes the
    // rest with posix_spawn_file_actions_addclosefrom_np).
    flags |= POSIX_SPAWN_CLOEXEC_DEFAULT;
#endif
    posix_spawnattr_setflags(&attributes_, static_cast<short>(flags));
  }
  ~own_group_attributes() { posix_spawnattr_destroy(&attributes_); }
  own_group_attributes(const own_group_attributes&) = delete;
  own_group_attributes& operator=(const own_group_attributes&) = delete;
  [[nodiscard]] const posix_spawnattr_t* get() const noexcept { return &attributes_; }

 private:
  posix_spawnattr_t attributes_{};
};

class file_actions {
 public:
  file_actions() { posix_spawn_file_actions_init(&actions_); }
  ~file_actions() { posix_spawn_file_actions_destroy(&actions_); }
  file_actions(const file_actions&) = delete;
  file_actions& operator=(const file_actions&) = delete;
  [[nodiscard]] posix_spawn_file_actions_t* get() noexcept { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_{};
};

/// The sources moved above the layout's targets, so that no dup2 onto 0..n-1 clobbers a source
/// still to be placed (and a source already at its target does not keep its close-on-exec flag).
/// The copies are closed when this goes.
class lifted_sources {
 public:
  explicit lifted_sources(const std::vector<int>& sources) {
    const int floor = static_cast<int>(sources.size());
    for (int fd : sources) {
      if (fd < 0) {
        fds_.push_back(-1);
        continue;
      }
      const int lifted = ::fcntl(fd, F_DUPFD_CLOEXEC, floor);
      if (lifted < 0) {
        error_ = errno;
        return;
      }
      fds_.push_back(lifted);
    }
  }
  ~lifted_sources() {
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
  }
  lifted_sources(const lifted_sources&) = delete;
  lifted_sources& operator=(const lifted_sources&) = delete;
  [[nodiscard]] int error() const noexcept { return error_; }
  [[nodiscard]] const std::vector<int>& fds() const noexcept { return fds_; }

 private:
  std::vector<int> fds_;
  int error_ = 0;
};

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> p;
  p.reserve(strings.size() + 1);
  for (std::string& s : strings) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

/// A descriptor that polls readable once the unreaped child `pid` has exited; -1 with errno set.
int open_exit_watch(pid_t pid) {
#ifdef __linux__
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  const int queue = ::kqueue();
  if (queue < 0) return -1;
  if (::fcntl(queue, F_SETFD, FD_CLOEXEC) != 0) {
    const int saved = errno;
    ::close(queue);
    errno = saved;
    return -1;
  }
  struct kevent watch {};
  EV_SET(&watch, static_cast<uintptr_t>(pid), EVFILT_PROC, EV_ADD | EV_ONESHOT, NOTE_EXIT, 0, nullptr);
  // A child that already exited (a zombie) is still found: NOTE_EXIT fires for it at once.
  if (::kevent(queue, &watch, 1, nullptr, 0, nullptr) != 0) {
    const int saved = errno;
    ::close(queue);
    errno = saved;
    return -1;
  }
  return queue;
#endif
}

/// waitid() on the child `pid` held by `pidfd`.
int wait_held(pid_t pid, int pidfd, siginfo_t& info, int options) {
#ifdef __linux__
  (void)pid;
  return ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info, options);
#else
  (void)pidfd;
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, options);
#endif
}

int signal_of(ending how) { return how == ending::kill ? SIGKILL : SIGTERM; }

exit_status status_of(const siginfo_t& info) {
  if (info.si_code == CLD_EXITED) return {info.si_status};
  return {128 + info.si_status};
}

}  // namespace

std::string spawn_error::message() const { return fmt::format("{}: {}", call, std::strerror(error)); }

std::string exit_status::text() const {
  if (code < 0) return "ended in a way that could not be read";
  if (code >= 128) return fmt::format("killed by signal {}", code - 128);
  return fmt::format("exited with status {}", code);
}

spawn_result child_process::spawn(const child_spec& spec) {
  if (spec.argv.empty() || spec.argv.front().empty()) return spawn_error{"posix_spawn()", ENOENT};
  const std::string& program = spec.argv.front();
  const char* spawn_name = spec.search_path ? "posix_spawnp" : "posix_spawn";

  const lifted_sources sources{spec.descriptors};
  if (sources.error() != 0) return spawn_error{"fcntl(F_DUPFD_CLOEXEC)", sources.error()};
  file_actions actions;
  for (std::size_t target = 0; target < sources.fds().size(); ++target) {
    const int fd = static_cast<int>(target);
    if (const int source = sources.fds()[target]; source >= 0)
      posix_spawn_file_actions_adddup2(actions.get(), source, fd);
    else
      posix_spawn_file_actions_addopen(actions.get(), fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0);
  }
#ifdef __linux__
  posix_spawn_file_actions_addclosefrom_np(actions.get(), static_cast<int>(sources.fds().size()));
#endif  // elsewhere POSIX_SPAWN_CLOEXEC_DEFAULT (own_group_attributes) closes what is not given

  std::vector<std::string> args = spec.argv;
  std::vector<std::string> environment = spec.environment;
  const auto argv = pointers(args);
  const auto envp = pointers(environment);
  const own_group_attributes attributes;
  pid_t pid = -1;
  const int rc = spec.search_path
                     ? ::posix_spawnp(&pid, program.c_str(), actions.get(), attributes.get(), argv.data(), envp.data())
                     : ::posix_spawn(&pid, program.c_str(), actions.get(), attributes.get(), argv.data(), envp.data());
  if (rc != 0) return spawn_error{fmt::format("{}({})", spawn_name, program), rc};

  const int pidfd = open_exit_watch(pid);
  if (pidfd < 0) {
    const int saved = errno;
    // Unreaped, the child's pid and group id are still its own.
    ::killpg(pid, SIGKILL);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
#ifdef __linux__
    return spawn_error{fmt::format("pidfd_open({})", pid), saved};
#else
    return spawn_error{fmt::format("kevent(EVFILT_PROC, {}, NOTE_EXIT)", pid), saved};
#endif
  }
  return child_process{pid, pidfd};
}

child_process::~child_process() { end(); }

child_process::child_process(child_process&& other) noexcept
    : pid_{std::exchange(other.pid_, -1)}, pidfd_{std::exchange(other.pidfd_, -1)} {}

child_process& child_process::operator=(child_process&& other) noexcept {
  if (this != &other) {
    end();
    pid_ = std::exchange(other.pid_, -1);
    pidfd_ = std::exchange(other.pidfd_, -1);
  }
  return *this;
}

void child_process::end() noexcept {
  if (pidfd_ < 0) return;
  signal_group(ending::kill);
  (void)reap();
}

bool child_process::wait_exit(std::chrono::milliseconds limit) const {
  if (pidfd_ < 0) return true;
  pollfd p{pidfd_, POLLIN, 0};
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    const int ready = ::poll(&p, 1, static_cast<int>(std::max<std::chrono::milliseconds::rep>(left.count(), 0)));
    if (ready > 0) return true;
    if (ready == 0 || errno != EINTR) return false;
  }
}

std::string child_process::status_text(std::chrono::milliseconds limit) const {
  if (pidfd_ < 0 || !wait_exit(limit)) return "still running";
  siginfo_t info{};
  if (wait_held(pid_, pidfd_, info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
      info.si_pid == 0)
    return "still running";
  return status_of(info).text();
}

void child_process::signal_group(ending how) const noexcept {
  if (pid_ > 0 && pidfd_ >= 0) ::killpg(pid_, signal_of(how));
}

exit_status child_process::reap() {
  if (pidfd_ < 0) return {};
  const exit_status status = reap_pidfd(pid_, pidfd_);
  ::close(pidfd_);
  pidfd_ = -1;
  pid_ = -1;
  return status;
}

child_process::released child_process::release() noexcept {
  return {std::exchange(pid_, -1), std::exchange(pidfd_, -1)};
}

exit_status child_process::reap_pidfd(pid_t pid, int pidfd) {
  siginfo_t info{};
  while (true) {
    if (wait_held(pid, pidfd, info, WEXITED) == 0) return status_of(info);
    if (errno != EINTR) return {};
  }
}

void child_process::signal_held(pid_t pid, int pidfd, ending how) noexcept {
#ifdef __linux__
  (void)pid;
  ::syscall(SYS_pidfd_send_signal, pidfd, signal_of(how), nullptr, 0);
#else
  // Unreaped, the child keeps its pid: kill() cannot reach another process.
  (void)pidfd;
  if (pid > 0) ::kill(pid, signal_of(how));
#endif
}

}  // namespace psych::host
