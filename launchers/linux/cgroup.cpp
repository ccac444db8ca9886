#include "cgroup.hpp"

#include "kernel_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <charconv>
#include <chrono>
#include <cmath>
#include <optional>
#include <utility>

#include <dirent.h>
#include <sys/xattr.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>

#include "platform/linux/cgroup_tree.hpp"
#include "psych/protocol/attach.hpp"  // cgroup_parent_variable
#include "platform/posix/retry.hpp"

namespace psych::launcher {

namespace {

using std::chrono::steady_clock;

constexpr auto cgroup_stage = launch_stage::cgroup;
constexpr auto kill_patience = std::chrono::seconds(2);
constexpr auto rmdir_patience = std::chrono::seconds(1);
constexpr std::int64_t cpu_period_us = 100000;  // the kernel's default period; the quota is a share of it
constexpr std::int64_t cpu_quota_min_us = 1000;  // the smallest quota the kernel accepts
constexpr double cpu_seconds_per_second_max = 1e6;  // far above any machine; keeps the quota an integer

// ---- files --------------------------------------------------------------------------------------

setup_result<std::string> read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(system_failure(cgroup_stage, "open", errno, path));
  std::string text;
  char chunk[4096];
  for (;;) {
    const ssize_t got = posix::retry_on_eintr([&] { return ::read(fd, chunk, sizeof chunk); });
    if (got <= 0) {
      const int error = got < 0 ? errno : 0;
      ::close(fd);
      if (error != 0) return fail(system_failure(cgroup_stage, "read", error, path));
      return text;
    }
    text.append(chunk, static_cast<std::size_t>(got));
  }
}

setup_result<void> write_file(const std::string& path, std::string_view value) {
  return write_kernel_file(cgroup_stage, path, value);
}

// The errors that say "this hierarchy is not the launcher's to use" (mounted read-only, not
// delegated, the controller not offered here, processes in the way) rather than "it is broken".
bool unusable(std::int64_t error) {
  return error == EACCES || error == EPERM || error == EROFS || error == ENOENT || error == EBUSY ||
         error == EOPNOTSUPP;
}

template <class T>
setup_result<bool> usable(const setup_result<T>& step) {
  if (step) return true;
  if (unusable(step.error().error_number)) return false;
  return fail(step.error());
}

// A SIGKILLed process leaves its cgroup as soon as it gets a CPU to exit on; a long wait between
// looks would only add to every kill and removal.
void pause_briefly() {
  const timespec pause{0, 100'000};
  ::nanosleep(&pause, nullptr);
}

// ---- where the launcher's own cgroup is ---------------------------------------------------------

using platform::cgroup_tree::has_item;
using platform::cgroup_tree::pieces;
using platform::cgroup_tree::trimmed;
using cgroup_view = platform::cgroup_tree::view;

std::optional<std::int64_t> to_int(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

setup_result<cgroup_view> read_view() {
  auto memberships = read_file("/proc/self/cgroup");
  // A kernel without cgroups has no such file: no hierarchy to use, which is not a failure.
  if (!memberships && memberships.error().error_number == ENOENT) return cgroup_view{};
  PSYCH_TRY(const auto own, std::move(memberships));
  PSYCH_TRY(const auto mounts, read_file("/proc/self/mountinfo"));
  return platform::cgroup_tree::parse_view(mounts, own);
}

// The launcher's own cgroup as a host directory: in the v1 hierarchy that holds `controller`, or
// in the v2 hierarchy when `controller` is empty. nullopt when no mount shows it.
std::optional<std::string> own_directory(const cgroup_view& view, std::string_view controller) {
  auto found = platform::cgroup_tree::own_cgroup(view, controller);
  if (!found) return std::nullopt;
  return std::move(found->directory);
}

// ---- what to create and write -------------------------------------------------------------------

struct setting {
  std::size_t directory = 0;  ///< index into the plan's parents, and so into the cgroup's directories
  std::string_view file;
  std::string value;
  bool optional = false;  ///< the kernel may lack it (no swap accounting): absent or refused, it is skipped
};

struct plan {
  cgroup_version version = cgroup_version::none;
  std::vector<std::string> parents;  ///< one per hierarchy, memory's first
  std::size_t exposed = 0;
  std::vector<setting> settings;
  std::optional<std::size_t> accounting;  ///< the parent whose child reports the tree's CPU time
};

bool wants_cpu(const cgroup_limits& limits) { return limits.cpu_seconds_per_second > 0; }

std::vector<std::string_view> controllers_for(const cgroup_limits& limits) {
  if (wants_cpu(limits)) return {"memory", "pids", "cpu"};
  return {"memory", "pids"};
}

// The kernel keeps whole pages; rounding up never grants less than was asked.
std::string memory_value(const cgroup_limits& limits) {
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const auto bytes = static_cast<std::uint64_t>(limits.memory_bytes);
  return fmt::format("{}", (bytes + page - 1) / page * page);
}

std::int64_t cpu_quota_us(const cgroup_limits& limits) {
  const auto quota = std::ceil(limits.cpu_seconds_per_second * static_cast<double>(cpu_period_us));
  return std::max(cpu_quota_min_us, static_cast<std::int64_t>(quota));
}

// ---- where a v2 execution cgroup goes -----------------------------------------------------------
//
// A v2 cgroup hands a controller to its children only when its cgroup.subtree_control enables it,
// and the kernel refuses that (EBUSY) in a cgroup that holds processes, the hierarchy's root
// excepted. The launcher always holds its own cgroup, so its executions go in the nearest cgroup at
// or above it that hands memory and pids down and that it may write; it moves nothing there but
// its own children. Where the walk may go, and where it may enable controllers, is bounded by
// what is psych's to manage (docs/cgroups.md).

// systemd marks a cgroup it delegated with an extended attribute (trusted.delegate from the system
// manager, user.delegate from a user's): that subtree is its unit's to manage, and nothing above it.
bool marked_delegated(const std::string& directory) {
  for (const char* name : {"trusted.delegate", "user.delegate"}) {
    char value[4] = {};
    if (::getxattr(directory.c_str(), name, value, sizeof value) > 0 && value[0] == '1') return true;
  }
  return false;
}

std::string parent_of(const std::string& directory) { return directory.substr(0, directory.rfind('/')); }

std::string pids_in(const std::string& directory) {
  const auto listed = read_file(directory + "/cgroup.procs");
  if (!listed) return "unreadable";
  const auto pids = pieces(listed.value(), '\n');
  if (pids.size() > 6) return fmt::format("{} and {} more", fmt::join(pids.begin(), pids.begin() + 5, ", "), pids.size() - 5);
  return fmt::format("{}", fmt::join(pids, ", "));
}

/// Empty when `directory` can parent executions with `wanted` (enabling them there if `may_enable`
/// and they are not yet); else why not, naming the controller, the file and what holds it back.
setup_result<std::string> why_not_parent(const std::string& directory, const std::vector<std::string_view>& wanted,
                                         bool may_enable) {
  const auto offered = read_file(directory + "/cgroup.controllers");
  if (!offered) {
    PSYCH_TRY(const bool readable, usable(offered));
    if (!readable) return fmt::format("{}: cgroup.controllers cannot be read ({})", directory, offered.error().message);
  }
  std::vector<std::string_view> absent;
  for (const auto controller : wanted)
    if (!has_item(offered.value(), controller, ' ')) absent.push_back(controller);
  if (!absent.empty())
    return fmt::format("the {} controller{} not available in {} (its cgroup.controllers: \"{}\"): the cgroup above it "
                       "does not delegate {}",
                       fmt::join(absent, " and "), absent.size() == 1 ? " is" : "s are", directory,
                       trimmed(offered.value()), absent.size() == 1 ? "it" : "them");
  if (::access(directory.c_str(), W_OK) != 0)
    return fmt::format("{} is not writable by uid {}: it is not this user's to manage", directory, ::geteuid());
  PSYCH_TRY(const auto enabled, read_file(directory + "/cgroup.subtree_control"));
  std::string missing;
  for (const auto controller : wanted)
    if (!has_item(enabled, controller, ' ')) missing += fmt::format("{}+{}", missing.empty() ? "" : " ", controller);
  if (missing.empty()) return std::string{};
  if (!may_enable)
    return fmt::format("{} does not hand {} down (its cgroup.subtree_control: \"{}\"), and it is not psych's to "
                       "change",
                       directory, missing, trimmed(enabled));
  auto written = write_file(directory + "/cgroup.subtree_control", missing);
  if (written) return std::string{};
  const auto error = written.error().error_number;
  if (error == EBUSY)
    return fmt::format("{} holds processes (pids {}), and a cgroup v2 cgroup that holds processes cannot hand "
                       "controllers down",
                       directory, pids_in(directory));
  if (!unusable(error)) return fail(std::move(written).error());
  return fmt::format("{}: writing \"{}\" to cgroup.subtree_control: {}", directory, missing, written.error().message);
}

/// What to do about it, for the account the launcher runs as.
std::string remedy() {
  if (::geteuid() == 0)
    return fmt::format("give psych a cgroup it may manage: run it in a systemd unit with Delegate=yes (psych serve, "
                       "run, and mcp settle themselves in a leaf of it), or set {} to a cgroup that holds no "
                       "processes (docs/cgroups.md)",
                       protocol::cgroup_parent_variable);
  return fmt::format("run psych under your systemd user manager with memory and pids delegated (systemd-run --user "
                     "--scope -p Delegate=yes psych ...; Delegate=memory pids in user@.service), or set {} to a cgroup "
                     "of yours that holds no processes (docs/cgroups.md)",
                     protocol::cgroup_parent_variable);
}

struct v2_parent {
  std::optional<std::string> directory;
  std::string why_none;  ///< when there is none, though a v2 hierarchy shows the launcher's cgroup
};

setup_result<v2_parent> find_v2_parent(const cgroup_view& view, const std::vector<std::string_view>& wanted) {
  const auto own = platform::cgroup_tree::own_cgroup(view, "");
  if (!own) return v2_parent{};
  const char* configured = std::getenv(std::string(protocol::cgroup_parent_variable).c_str());
  if (configured != nullptr && *configured != 0) {
    // As /proc/self/cgroup names a cgroup, or as a directory under the mount.
    std::string directory = configured;
    if (!directory.starts_with(own->mount_point + "/")) directory = own->mount_point + "/" + directory;
    while (directory.size() > 1 && directory.back() == '/') directory.pop_back();
    if (::mkdir(directory.c_str(), 0755) != 0 && errno != EEXIST)
      return v2_parent{std::nullopt, fmt::format("{}={}: mkdir {}: {}", protocol::cgroup_parent_variable, configured,
                                                 directory, std::strerror(errno))};
    PSYCH_TRY(const auto why, why_not_parent(directory, wanted, true));
    if (why.empty()) return v2_parent{directory, {}};
    return v2_parent{std::nullopt, fmt::format("{}={}: {}", protocol::cgroup_parent_variable, configured, why)};
  }
  // Above a cgroup systemd delegated is not the launcher's: the walk ends there. Without such a
  // mark, an unprivileged launcher's reach is what the kernel lets it write (delegation by
  // ownership); root may use any cgroup above that already hands the controllers down, but
  // enables them only in a delegated subtree or at the top of what it sees (a container's own).
  std::optional<std::string> boundary;
  for (std::string at = own->directory;; at = parent_of(at)) {
    if (marked_delegated(at)) {
      boundary = at;
      break;
    }
    if (at.size() <= own->mount_point.size()) break;
  }
  std::string first_reason;
  for (std::string at = own->directory;; at = parent_of(at)) {
    const bool top = at.size() <= own->mount_point.size();
    const bool may_enable = boundary || top || ::geteuid() != 0;
    PSYCH_TRY(const auto why, why_not_parent(at, wanted, may_enable));
    if (why.empty()) return v2_parent{at, {}};
    if (first_reason.empty()) first_reason = why;
    if (top || at == boundary) break;
  }
  return v2_parent{std::nullopt, fmt::format("cgroup v2: {}; no cgroup above it can hold the executions either. To "
                                             "fix: {}",
                                             first_reason, remedy())};
}

std::vector<setting> v2_settings(const cgroup_limits& limits) {
  std::vector<setting> settings = {{0, "memory.max", memory_value(limits)},
                                   {0, "memory.swap.max", "0", true},
                                   // An OOM kill takes the whole tree, never one process of it.
                                   {0, "memory.oom.group", "1", true},
                                   {0, "pids.max", fmt::format("{}", limits.pids)}};
  if (wants_cpu(limits)) settings.push_back({0, "cpu.max", fmt::format("{} {}", cpu_quota_us(limits), cpu_period_us)});
  return settings;
}

setup_result<std::optional<plan>> plan_v2(const cgroup_view& view, const cgroup_limits& limits, std::string& why_none) {
  PSYCH_TRY(const auto found, find_v2_parent(view, controllers_for(limits)));
  if (!found.directory) {
    why_none = found.why_none;
    return std::optional<plan>{};
  }
  // cpu.stat's usage needs no controller.
  return std::optional<plan>(plan{cgroup_version::v2, {*found.directory}, 1, v2_settings(limits), 0});
}

setup_result<std::optional<plan>> plan_v1(const cgroup_view& view, const cgroup_limits& limits) {
  plan result{cgroup_version::v1, {}, 0, {}, std::nullopt};
  // Controllers may share a hierarchy (mounted together), and then share a directory.
  std::vector<std::size_t> at;
  for (const auto controller : controllers_for(limits)) {
    auto parent = own_directory(view, controller);
    if (!parent) return std::optional<plan>{};
    const auto found = std::find(result.parents.begin(), result.parents.end(), *parent);
    at.push_back(static_cast<std::size_t>(found - result.parents.begin()));
    if (found == result.parents.end()) result.parents.push_back(std::move(*parent));
  }
  result.exposed = std::max(at[0], at[1]) + 1;
  // The tree's CPU time, where a cpuacct hierarchy exists; an accounting the launcher reads, not a
  // limit, so its absence is no reason to give up on v1.
  if (auto parent = own_directory(view, "cpuacct")) {
    const auto found = std::find(result.parents.begin(), result.parents.end(), *parent);
    result.accounting = static_cast<std::size_t>(found - result.parents.begin());
    if (found == result.parents.end()) result.parents.push_back(std::move(*parent));
    result.exposed = std::max(result.exposed, *result.accounting + 1);  // the child reads it back too
  }
  const auto memory = memory_value(limits);
  // memsw (memory + swap) must not be below the memory limit, so it is written after it.
  result.settings = {{at[0], "memory.limit_in_bytes", memory},
                     {at[0], "memory.memsw.limit_in_bytes", memory, true},
                     {at[1], "pids.max", fmt::format("{}", limits.pids)}};
  if (wants_cpu(limits)) {
    result.settings.push_back({at[2], "cpu.cfs_period_us", fmt::format("{}", cpu_period_us)});
    result.settings.push_back({at[2], "cpu.cfs_quota_us", fmt::format("{}", cpu_quota_us(limits))});
  }
  return std::optional<plan>(std::move(result));
}

setup_result<void> check_limits(const cgroup_limits& limits) {
  const double cpu = limits.cpu_seconds_per_second;
  if (limits.memory_bytes > 0 && limits.pids > 0 && cpu >= 0 && cpu <= cpu_seconds_per_second_max) return success();
  return fail(refusal(cgroup_stage, fmt::format("cgroup limits of {} bytes, {} pids and {} cpu seconds per second: memory "
                                         "and pids must be positive, cpu from 0 to {}",
                                         limits.memory_bytes, limits.pids, cpu, cpu_seconds_per_second_max)));
}

// Unique while this launcher lives; see make_child for a name a dead launcher left behind.
std::string next_name() {
  static std::uint64_t counter = 0;
  return fmt::format("psych-{}-{}", ::getpid(), counter++);
}

// A name with the launcher's pid in it is the launcher's own, so one that exists already was left
// by a dead launcher that had the same pid. It goes; rmdir refuses (EBUSY) if processes remain.
// A launcher killed outright (SIGKILL, OOM) never removes its cgroup; its sandbox died with it
// (init's parent-death signal), so what it left is empty. Only names of launchers that are gone are
// touched: "psych-<pid>-<n>" with no process <pid>. A recycled pid keeps its directory for the
// next launcher after it.
void remove_abandoned(const std::string& parent) {
  DIR* listing = ::opendir(parent.c_str());
  if (listing == nullptr) return;
  while (const dirent* entry = ::readdir(listing)) {
    const std::string_view name = entry->d_name;
    if (!name.starts_with("psych-")) continue;
    const auto rest = name.substr(6);
    const auto pid = to_int(rest.substr(0, rest.find('-')));
    if (pid && *pid > 0 && *pid != ::getpid() && ::kill(static_cast<pid_t>(*pid), 0) != 0 && errno == ESRCH)
      ::rmdir((parent + "/" + std::string(name)).c_str());
  }
  ::closedir(listing);
}

setup_result<std::optional<std::string>> make_child(const std::string& parent, const std::string& name) {
  remove_abandoned(parent);
  std::string directory = parent + "/" + name;
  int made = ::mkdir(directory.c_str(), 0755);
  if (made != 0 && errno == EEXIST) {
    if (::rmdir(directory.c_str()) != 0)
      return fail(system_failure(cgroup_stage, "rmdir", errno, fmt::format("{} (left by a dead launcher)", directory)));
    made = ::mkdir(directory.c_str(), 0755);
  }
  if (made == 0) return std::optional<std::string>(std::move(directory));
  if (unusable(errno)) return std::optional<std::string>{};
  return fail(system_failure(cgroup_stage, "mkdir", errno, directory));
}

setup_result<void> write_limits(const std::vector<std::string>& directories, const std::vector<setting>& settings) {
  for (const auto& limit : settings) {
    const auto path = fmt::format("{}/{}", directories[limit.directory], limit.file);
    auto written = write_file(path, limit.value);
    const auto error = written ? 0 : written.error().error_number;
    if (limit.optional && (error == ENOENT || error == EINVAL)) continue;
    PSYCH_TRY(std::move(written));
    PSYCH_TRY(const auto text, read_file(path));
    if (trimmed(text) != limit.value)
      return fail(refusal(cgroup_stage, fmt::format("{} reads back {:?} after {:?} was written", path, trimmed(text),
                                             limit.value)));
  }
  return success();
}

// ---- processes in it ----------------------------------------------------------------------------

// What cgroup.procs lists now; nothing when it cannot be read (the directory is gone).
std::vector<pid_t> listed_processes(const std::string& directory) {
  std::vector<pid_t> result;
  const auto text = read_file(directory + "/cgroup.procs");
  if (!text) return result;
  for (const auto line : pieces(text.value(), '\n'))
    if (const auto pid = to_int(line); pid && *pid > 0) result.push_back(static_cast<pid_t>(*pid));
  return result;
}

// SIGKILLs what `directory` lists; false when it lists nothing. A listed pid may be recycled before
// the signal lands, so each is pinned by a pidfd and then must still be listed: a process keeps
// its pid until it is reaped, and signalling one that died meanwhile merely fails.
bool kill_listed(const std::string& directory, std::vector<pid_t>& signalled) {
  const auto listed = listed_processes(directory);
  std::vector<std::pair<pid_t, int>> pinned;
  for (const pid_t pid : listed) {
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pidfd >= 0) pinned.emplace_back(pid, pidfd);
  }
  const auto confirmed = pinned.empty() ? std::vector<pid_t>{} : listed_processes(directory);
  for (const auto& [pid, pidfd] : pinned) {
    if (std::find(confirmed.begin(), confirmed.end(), pid) != confirmed.end() &&
        ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0) == 0)
      signalled.push_back(pid);
    ::close(pidfd);
  }
  return !listed.empty();
}

// Without cgroup.kill, listing again catches what forked while the last round was signalled.
std::int64_t kill_round_by_round(const std::vector<std::string>& directories) {
  std::vector<pid_t> signalled;
  const auto deadline = steady_clock::now() + kill_patience;
  for (;;) {
    bool listed = false;
    for (const auto& directory : directories) listed = kill_listed(directory, signalled) || listed;
    if (!listed || steady_clock::now() >= deadline) break;
    pause_briefly();
  }
  std::sort(signalled.begin(), signalled.end());
  return std::unique(signalled.begin(), signalled.end()) - signalled.begin();
}

// A memory cgroup can stay busy for a moment after its last task died, while the kernel uncharges it.
setup_result<void> remove_directory(const std::string& directory, steady_clock::time_point deadline) {
  for (;;) {
    if (::rmdir(directory.c_str()) == 0 || errno == ENOENT) return success();
    const int error = errno;
    if (error != EBUSY || steady_clock::now() >= deadline)
      return fail(system_failure(cgroup_stage, "rmdir", error, directory));
    pause_briefly();
  }
}

// A counter in a cgroup file: the number on the line starting with `key`, or the whole file's
// number when `key` is empty. 0 when unreadable.
struct counter {
  std::string_view file;
  std::string_view key;
};

constexpr counter v1_memory_hits[] = {{"memory.failcnt", ""}, {"memory.oom_control", "oom_kill"}};
constexpr counter v2_memory_hits[] = {{"memory.events", "max"}, {"memory.events", "oom_kill"}};

std::int64_t read_counter(const std::string& directory, const counter& which) {
  const auto text = read_file(fmt::format("{}/{}", directory, which.file));
  if (!text) return 0;
  if (which.key.empty()) return to_int(trimmed(text.value())).value_or(0);
  for (const auto line : pieces(text.value(), '\n')) {
    const auto space = line.find(' ');
    if (space != std::string_view::npos && line.substr(0, space) == which.key)
      return to_int(trimmed(line.substr(space + 1))).value_or(0);
  }
  return 0;
}

}  // namespace

std::string_view name_of_version(cgroup_version version) {
  switch (version) {
    case cgroup_version::v1: return "v1";
    case cgroup_version::v2: return "v2";
    case cgroup_version::none: break;
  }
  return "none";
}

execution_cgroup::execution_cgroup(execution_cgroup&& other) noexcept
    : version_(std::exchange(other.version_, cgroup_version::none)),
      directories_(std::exchange(other.directories_, {})),
      exposed_(std::exchange(other.exposed_, 0)),
      accounting_(std::exchange(other.accounting_, std::nullopt)),
      removed_(std::exchange(other.removed_, false)),
      why_none_(std::exchange(other.why_none_, {})) {}

execution_cgroup& execution_cgroup::operator=(execution_cgroup&& other) noexcept {
  if (this != &other) {
    (void)remove();
    version_ = std::exchange(other.version_, cgroup_version::none);
    directories_ = std::exchange(other.directories_, {});
    exposed_ = std::exchange(other.exposed_, 0);
    accounting_ = std::exchange(other.accounting_, std::nullopt);
    removed_ = std::exchange(other.removed_, false);
    why_none_ = std::exchange(other.why_none_, {});
  }
  return *this;
}

execution_cgroup::~execution_cgroup() { (void)remove(); }

setup_result<execution_cgroup> execution_cgroup::create(const cgroup_limits& limits) {
  PSYCH_TRY(check_limits(limits));
  PSYCH_TRY(const auto view, read_view());
  const auto name = next_name();
  std::string why_no_v2;
  const auto make = [&](const plan& planned) -> setup_result<std::optional<execution_cgroup>> {
    execution_cgroup cgroup;
    cgroup.version_ = planned.version;
    cgroup.exposed_ = planned.exposed;
    cgroup.accounting_ = planned.accounting;
    for (const auto& parent : planned.parents) {
      PSYCH_TRY(auto directory, make_child(parent, name));
      if (!directory) break;
      cgroup.directories_.push_back(std::move(*directory));
    }
    // A hierarchy that let us make some directories but not all is no use: the destructor undoes them.
    if (cgroup.directories_.size() != planned.parents.size()) return std::optional<execution_cgroup>{};
    PSYCH_TRY(write_limits(cgroup.directories_, planned.settings));
    return std::optional<execution_cgroup>(std::move(cgroup));
  };
  // A controller lives in one hierarchy only: where a v1 memory hierarchy is mounted (a hybrid
  // host), the v2 one cannot offer memory, and only v1 is worth planning, at every launch.
  if (!own_directory(view, "memory")) {
    PSYCH_TRY(const auto v2, plan_v2(view, limits, why_no_v2));
    if (v2) {
      PSYCH_TRY(auto made, make(*v2));
      if (made) return std::move(*made);
      why_no_v2 = fmt::format("cgroup v2: no child could be made in {}", v2->parents.front());
    }
  }
  PSYCH_TRY(const auto v1, plan_v1(view, limits));
  if (v1) {
    PSYCH_TRY(auto made, make(*v1));
    if (made) return std::move(*made);
  }
  execution_cgroup none;
  none.why_none_ = std::move(why_no_v2);
  return none;
}

cgroup_version execution_cgroup::version() const { return version_; }

setup_result<void> execution_cgroup::narrow(const cgroup_limits& limits) const {
  if (version_ == cgroup_version::none) return success();
  PSYCH_TRY(check_limits(limits));
  PSYCH_TRY(const auto view, read_view());
  // v2's settings are all in its one directory, wherever it was made.
  if (version_ == cgroup_version::v2) return write_limits(directories_, v2_settings(limits));
  // The same plan as create()'s, so each setting names the same directory by the same index.
  PSYCH_TRY(const auto planned, plan_v1(view, limits));
  if (!planned || planned->parents.size() != directories_.size())
    return fail(refusal(cgroup_stage, "the hierarchy the cgroup was made in no longer plans the same directories"));
  return write_limits(directories_, planned->settings);
}

setup_result<void> execution_cgroup::attach(pid_t pid) const {
  if (removed_) return fail(refusal(cgroup_stage, fmt::format("pid {} cannot join a cgroup that was removed", pid)));
  for (const auto& directory : directories_) {
    PSYCH_TRY(write_file(directory + "/cgroup.procs", fmt::format("{}", pid)));
  }
  return success();
}

std::vector<std::string> execution_cgroup::directories() const {
  if (removed_) return {};
  return {directories_.begin(), directories_.begin() + static_cast<std::ptrdiff_t>(exposed_)};
}

std::int64_t execution_cgroup::kill_all() const {
  if (directories_.empty()) return 0;
  if (version_ == cgroup_version::v2) {
    // cgroup.kill also stops what forks while it works; only what was listed first is counted.
    const auto listed = static_cast<std::int64_t>(listed_processes(directories_.front()).size());
    if (write_file(directories_.front() + "/cgroup.kill", "1")) return listed;
  }
  return kill_round_by_round(directories_);
}

bool execution_cgroup::memory_limit_hit() const {
  if (directories_.empty() || removed_) return false;
  const auto& memory = directories_.front();
  const auto hit = [&](const counter& which) { return read_counter(memory, which) > 0; };
  if (version_ == cgroup_version::v2) return std::any_of(std::begin(v2_memory_hits), std::end(v2_memory_hits), hit);
  return std::any_of(std::begin(v1_memory_hits), std::end(v1_memory_hits), hit);
}

std::optional<double> execution_cgroup::cpu_seconds() const {
  if (!accounting_ || removed_ || *accounting_ >= directories_.size()) return std::nullopt;
  const auto& directory = directories_[*accounting_];
  if (version_ == cgroup_version::v2) {
    const auto micros = read_counter(directory, {"cpu.stat", "usage_usec"});
    return static_cast<double>(micros) / 1e6;
  }
  const auto text = read_file(directory + "/cpuacct.usage");
  if (!text) return std::nullopt;
  const auto nanos = to_int(trimmed(text.value()));
  if (!nanos) return std::nullopt;
  return static_cast<double>(*nanos) / 1e9;
}

setup_result<void> execution_cgroup::remove() {
  if (directories_.empty()) return success();
  removed_ = true;
  accounting_.reset();
  kill_all();
  const auto deadline = steady_clock::now() + rmdir_patience;
  std::vector<std::string> left;
  std::optional<setup_error> first_failure;
  for (auto& directory : directories_) {
    auto removed = remove_directory(directory, deadline);
    if (removed) continue;
    if (!first_failure) first_failure = std::move(removed).error();
    left.push_back(std::move(directory));
  }
  directories_ = std::move(left);
  if (first_failure) return fail(std::move(*first_failure));
  return success();
}

std::optional<double> container_cpu_seconds() {
  if (const auto nanos = read_file("/sys/fs/cgroup/cpuacct/cpuacct.usage")) {
    if (const auto value = to_int(trimmed(nanos.value()))) return static_cast<double>(*value) / 1e9;
  }
  if (read_file("/sys/fs/cgroup/cpu.stat"))
    return static_cast<double>(read_counter("/sys/fs/cgroup", {"cpu.stat", "usage_usec"})) / 1e6;
  return std::nullopt;
}

bool container_memory_limit_hit() {
  const auto hit = [](const std::string& directory, const auto& counters) {
    return std::any_of(std::begin(counters), std::end(counters),
                       [&](const counter& which) { return read_counter(directory, which) > 0; });
  };
  return hit("/sys/fs/cgroup/memory", v1_memory_hits) || hit("/sys/fs/cgroup", v2_memory_hits);
}

}  // namespace psych::launcher
