#include "backends/container/container_starter.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "platform/posix/descriptor_passing.hpp"
#include "os/child_process.hpp"
#include "os/same_secret.hpp"
#include "execution/session.hpp"  // random_token

namespace psych::host {
namespace {

using clock = std::chrono::steady_clock;

/// How long a container may take to start its launcher (a cold runtime, a first run of an image).
constexpr auto start_limit = std::chrono::seconds(60);
/// How long a connection may take to present its token before it is dropped.
constexpr auto token_limit = std::chrono::seconds(2);
constexpr std::size_t token_line_max = 130;
constexpr const char* socket_name = "s";

result<void> system_error(std::string_view call, std::string_view what) {
  return fail_with(error_kind::system_call_failed, fmt::format("{}({}): {}", call, what, std::strerror(errno)));
}

/// The first line a connection sends, within token_limit; nullopt when it does not.
std::optional<std::string> first_line(int connection) {
  std::string line;
  const auto deadline = clock::now() + token_limit;
  while (line.size() < token_line_max) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left <= 0) return std::nullopt;
    pollfd ready{connection, POLLIN, 0};
    const int n = ::poll(&ready, 1, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    char buffer[token_line_max];
    const ssize_t got = ::recv(connection, buffer, token_line_max - line.size(), 0);
    if (got <= 0) return std::nullopt;
    line.append(buffer, static_cast<std::size_t>(got));
    if (const auto end = line.find('\n'); end != std::string::npos) {
      // Nothing may follow the token: the launcher waits for the descriptors before it says more.
      if (end + 1 != line.size()) return std::nullopt;
      line.resize(end);
      return line;
    }
  }
  return std::nullopt;
}

result<void> send_descriptors(int connection, const launcher_fds& fds) {
  // The egress handover (network=allowlist) rides along as a fifth; the launcher takes four or five.
  const int handed[5] = {fds.stdout_write, fds.stderr_write, fds.control, fds.channel, fds.egress_handover};
  const std::size_t count = fds.egress_handover >= 0 ? 5 : 4;
  if (const int error = posix::send_descriptors<5>(connection, std::span<const int>(handed, count)); error != 0) {
    errno = error;
    return system_error("sendmsg", "the launcher's descriptors");
  }
  return success();
}

/// The uid of the process at the other end of a Unix socket, or -1: SO_PEERCRED on Linux,
/// getpeereid() on macOS (which also marks the socket SO_NOSIGPIPE for send_descriptors).
std::int64_t peer_uid(int connection) {
#ifdef SO_PEERCRED
  ucred peer{};
  socklen_t size = sizeof peer;
  if (::getsockopt(connection, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0) return -1;
  return static_cast<std::int64_t>(peer.uid);
#else
  const int on = 1;
  if (::setsockopt(connection, SOL_SOCKET, SO_NOSIGPIPE, &on, sizeof on) != 0) return -1;
  uid_t uid = 0;
  gid_t gid = 0;
  if (::getpeereid(connection, &uid, &gid) != 0) return -1;
  return static_cast<std::int64_t>(uid);
#endif
}

/// A close-on-exec descriptor, set at once where the kernel can (SOCK_CLOEXEC), else right after.
[[maybe_unused]] int with_cloexec(int fd) {
  if (fd >= 0 && ::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

container_starter::container_starter(container_launch launch)
    : launch_(std::move(launch)),
      name_("psych-" + (launch_.execution_id.empty() ? random_token() : launch_.execution_id).substr(0, 32)) {}

container_starter::~container_starter() {
  if (may_linger_) launch_.runtime.remove(name_);
  if (!socket_dir_.empty()) {
    ::unlink((socket_dir_ + "/" + socket_name).c_str());
    ::rmdir(socket_dir_.c_str());
  }
}

result<void> container_starter::make_channel_directory() {
  // Owned by the worker, group the execution's own gid, 0710: only the worker and the container's
  // identity can reach the socket in it; every other local account stops at the directory.
  std::string pattern = launch_.temp_root + "/psych-channel-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return system_error("mkdtemp", pattern);
  socket_dir_ = pattern;
  if (::chown(socket_dir_.c_str(), ::geteuid(), static_cast<gid_t>(launch_.child.gid)) != 0)
    return system_error("chown", socket_dir_);
  if (::chmod(socket_dir_.c_str(), 0710) != 0) return system_error("chmod", socket_dir_);

  const auto path = socket_dir_ + "/" + socket_name;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path)
    return fail_with(error_kind::sandbox_setup, fmt::format("the channel's socket path {} is too long", path));
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
#ifdef SOCK_CLOEXEC
  listener_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
#else
  listener_.reset(with_cloexec(::socket(AF_UNIX, SOCK_STREAM, 0)));
#endif
  if (!listener_.valid()) return system_error("socket", "AF_UNIX");
  if (::bind(listener_.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0)
    return system_error("bind", path);
  if (::chown(path.c_str(), static_cast<uid_t>(launch_.child.uid), static_cast<gid_t>(launch_.child.gid)) != 0)
    return system_error("chown", path);
  if (::chmod(path.c_str(), 0600) != 0) return system_error("chmod", path);
  if (::listen(listener_.get(), 4) != 0) return system_error("listen", path);
  return success();
}

std::vector<std::string> container_starter::run_arguments(const execution_dirs& dirs) const {
  const auto& limits = launch_.limits;
  const auto memory = static_cast<std::int64_t>(limits.address_space_bytes.value);
  // The launcher is the container's pid 1 and counts too.
  const auto pids = static_cast<std::int64_t>(limits.process_count.value) + 1;
  std::vector<std::string> args = {
      "run", "--rm", "--interactive", "--name", name_, "--label", "psych.execution=" + launch_.execution_id,
      // Never a pull: a missing image fails here, and describe() said so before.
      "--pull=never",
      "--network=none", "--ipc=private", "--uts=private", "--pid=private", "--cgroupns=private",
      "--read-only", "--cap-drop=ALL", "--security-opt=no-new-privileges",
      fmt::format("--user={}:{}", launch_.child.uid, launch_.child.gid),
      fmt::format("--pids-limit={}", pids), fmt::format("--memory={}", memory),
      fmt::format("--memory-swap={}", memory),
      // The launcher sets the child's own rlimits; these are only the ceiling it lowers from.
      "--ulimit=nofile=1024:1024", fmt::format("--ulimit=nproc={0}:{0}", pids + 64),
      "--log-driver=none",
      // The program's own /tmp, as at ISOLATED: a private tmpfs, capped, its pages charged to the
      // container's memory cgroup. The execution's directories are mounted inside it.
      "--tmpfs=/tmp:rw,nosuid,nodev,size=64m,mode=1777",
      "--volume=" + dirs.workspace + ":" + dirs.workspace + ":rw",
      "--volume=" + dirs.tmp + ":" + dirs.tmp + ":rw",
      "--volume=" + launch_.launcher_path + ":" + launcher_inside + ":ro",
      "--volume=" + socket_dir_ + ":" + channel_inside + ":rw",
      "--entrypoint=" + std::string(launcher_inside)};
  if (launch_.runtime.name == "podman") {
    // A read-only root with nothing writable but the execution's own two directories: no tmpfs on
    // /run, /tmp and /var/tmp either (podman adds those to --read-only unless told not to; docker
    // does not). The launcher's own environment holds nothing of podman's defaults or the worker's
    // proxies (the child's is built by the launcher from the launch frame alone).
    for (const char* flag : {"--read-only-tmpfs=false", "--unsetenv-all", "--http-proxy=false"}) args.emplace_back(flag);
  }
  args.insert(args.end(), launch_.extra_run_args.begin(), launch_.extra_run_args.end());
  args.push_back(launch_.image);
  args.emplace_back("--connect");
  args.push_back(std::string(channel_inside) + "/" + socket_name);
  return args;
}

result<void> container_starter::hand_over(const launcher_fds& fds, int runtime_pidfd) {
  const auto deadline = clock::now() + start_limit;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left <= 0)
      return fail_with(error_kind::launcher_unavailable,
                     fmt::format("the container's launcher did not connect within {} s{}", start_limit.count(),
                                 runtime_stderr()));
    pollfd ready[2] = {{listener_.get(), POLLIN, 0}, {runtime_pidfd, POLLIN, 0}};
    const int n = ::poll(ready, 2, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return system_error("poll", "the channel's socket");
    if (ready[0].revents == 0 && ready[1].revents != 0)
      return fail_with(error_kind::launcher_unavailable,
                     "the container runtime ended before the launcher connected" + runtime_stderr());
    if (ready[0].revents == 0) continue;
#ifdef SOCK_CLOEXEC
    unique_fd connection{::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC)};
#else
    unique_fd connection{with_cloexec(::accept(listener_.get(), nullptr, nullptr))};
#endif
    if (!connection.valid()) continue;
    // The directory already keeps other accounts out; the peer's uid and the token are checked
    // anyway, so that neither a mistake in modes nor a process of the same uid can answer.
    if (peer_uid(connection.get()) != launch_.child.uid) continue;
    const auto presented = first_line(connection.get());
    if (!presented || !same_secret(*presented, token_)) continue;
    // The one good connection: nobody can connect after it.
    listener_.reset();
    ::unlink((socket_dir_ + "/" + socket_name).c_str());
    return send_descriptors(connection.get(), fds);
  }
}

std::string container_starter::runtime_stderr() const {
  if (!stderr_file_.valid()) return {};
  char buffer[4096];
  const ssize_t n = ::pread(stderr_file_.get(), buffer, sizeof buffer, 0);
  if (n <= 0) return {};
  return fmt::format(" ({} said: {})", launch_.runtime.name,
                     without_trailing_space(std::string(buffer, static_cast<std::size_t>(n))));
}

result<launcher_process> container_starter::start(const launcher_fds& fds, const execution_dirs& dirs) {
  PSYCH_TRY(make_channel_directory());
  // The launcher inside is not root and cannot take the directories over itself.
  for (const auto* dir : {&dirs.workspace, &dirs.tmp})
    if (::chown(dir->c_str(), static_cast<uid_t>(launch_.child.uid), static_cast<gid_t>(launch_.child.gid)) != 0)
      return system_error("chown", *dir).error();
  token_ = random_token();

  PSYCH_TRY(auto input, cloexec_pipe());
#ifdef O_TMPFILE
  stderr_file_.reset(::open(launch_.temp_root.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!stderr_file_.valid()) return system_error("open", launch_.temp_root + ", O_TMPFILE").error();
#else
  // No O_TMPFILE (macOS): a named file, unlinked at once; 0600 and the worker's own meanwhile.
  std::string stderr_path = launch_.temp_root + "/psych-runtime-stderr-XXXXXX";
  stderr_file_.reset(with_cloexec(::mkstemp(stderr_path.data())));
  if (!stderr_file_.valid()) return system_error("mkstemp", stderr_path).error();
  ::unlink(stderr_path.c_str());
#endif
  std::vector<std::string> argv = run_arguments(dirs);
  argv.insert(argv.begin(), launch_.runtime.path);
  auto runtime = child_process::spawn({.argv = argv,
                                       .environment = container_runtime::environment(),
                                       .descriptors = {input.first.get(), -1, stderr_file_.get()}});
  if (!runtime) return fail_with(error_kind::launcher_unavailable, runtime.error().message());
  may_linger_ = true;
  input.first.reset();
  // The token goes only to the runtime's stdin, which it passes to the launcher: never into an
  // argument or a variable, which other local accounts could read in /proc.
  const auto line = token_ + "\n";
  const bool written = ::write(input.second.get(), line.data(), line.size()) == static_cast<ssize_t>(line.size());
  input.second.reset();
  if (!written) return fail_with(error_kind::launcher_unavailable, "the container runtime did not take the token" + runtime_stderr());
  if (auto handed = hand_over(fds, runtime.value().pidfd()); !handed) {
    launch_.runtime.remove(name_);
    runtime.value().signal_group(ending::kill);
    return handed.error();
  }
  const auto held = runtime.value().release();
  return launcher_process{.pid = held.pid, .pidfd = held.pidfd};
}

void container_starter::kill(const launcher_process&) {
  launch_.runtime.remove(name_);
  may_linger_ = false;
}

void container_starter::reaped(int status) {
  // `run --rm` removes the container before it exits 0 (the launcher's own status); any other end
  // of the runtime's client may leave it behind.
  if (status == 0) may_linger_ = false;
}

void container_starter::add_mechanisms(mechanism_report& report) const {
  for (const char* kind : {"mount", "pid", "net", "ipc", "uts", "cgroup"})
    if (std::find(report.namespaces.begin(), report.namespaces.end(), kind) == report.namespaces.end())
      report.namespaces.emplace_back(kind);
  report.uid_drop = true;
  report.cgroup = "container";
  // What the child's "/" may hold: the image's own entries, and the mount points the runtime
  // makes (the proc, sys and dev file systems, the tmpfs on /run and /tmp).
  if (!launch_.image_root_entries.empty()) {
    report.root_entries = launch_.image_root_entries;
    for (const char* made : {"proc", "sys", "dev", "run", "tmp", "etc"})
      if (std::find(report.root_entries.begin(), report.root_entries.end(), made) == report.root_entries.end())
        report.root_entries.emplace_back(made);
  }
}

}  // namespace psych::host
