// The local backends (on Linux PROCESS and ISOLATED, one launcher; on macOS PROCESS), and the
// choice among them.
#ifndef _WIN32
#include <sys/wait.h>
#include <unistd.h>
#endif
#ifdef __linux__
#include <sched.h>  // unshare: the user namespace probe
#endif

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backends/backend_support.hpp"
#include "os/host_environment.hpp"
#include "platform/utf8_path.hpp"
#include "backends/local/interpreter.hpp"
#include "backends/platform_backends.hpp"
#include "backends/local/prepared_pool.hpp"
#include "psych/host/sandbox.hpp"
#include "execution/session.hpp"
#include "backends/uid_pool.hpp"
#ifdef __linux__
#include "os/userns_settings.hpp"
#endif

namespace psych {
namespace {

#ifdef _WIN32
/// Windows has no uids: no worker is root in the sense that lets a child run as another account,
/// and every child runs as the worker's own (identity: unavailable).
bool worker_is_root() { return false; }
std::int64_t worker_uid() { return -1; }
#else
bool worker_is_root() { return ::geteuid() == 0; }
std::int64_t worker_uid() { return ::getuid(); }
#endif

#ifdef __linux__
/// The host setting that refused this process's user namespaces with `error_number`, with its
/// remedy for `launcher`; nullopt when none did (the errno alone is then all there is to say).
std::optional<std::string> userns_refused_by(int error_number, std::string_view launcher) {
  return host::userns_restriction(host::read_userns_settings(),
                                  {.error_number = error_number, .root = worker_is_root(), .launcher = launcher});
}
#endif

/// A backend that runs this platform's launcher (docs/contract.md) at one level.
class launcher_sandbox final : public sandbox {
 public:
  /// `identities`: where a root worker's children get their uid; null: the worker's own.
  launcher_sandbox(const local_sandbox_options& options, std::string name, std::string launcher,
                   host::interpreter_choice python, isolation_level level, std::shared_ptr<host::uid_pool> identities)
      : options_(options), name_(std::move(name)), launcher_(std::move(launcher)), python_(std::move(python)),
        environment_(host::child_environment(options.env_allowlist)), level_(level), identities_(std::move(identities)) {
    if (options_.pool.size == 0) return;
    // A waiting sandbox must be out of every running execution's reach. At PROCESS only its uid
    // separates it from them, so a pool needs a uid per execution; ISOLATED has its namespaces.
    const bool own_uid = identities_ && identities_->report().mode == run_as_mode::per_execution;
    if (level_ == isolation_level::process && !own_uid) {
      pool_refused_ = "prepared: off: at isolation=process a waiting sandbox would share its uid with running "
                      "executions, which could reach it; give the worker root and a run_as_range, or use isolated";
      return;
    }
    pool_ = std::make_unique<host::prepared_pool>(options_.pool, [this] { return prepare(); });
  }

  /// network=allowlist needs a network namespace of the program's own that reaches only the proxy
  /// (docs/network.md): ISOLATED has one; PROCESS shares the host's, and refuses it.
  bool holds_allowlist() const { return level_ == isolation_level::isolated; }

  backend_offer offer() const override {
    return {.ready = true,
            .isolation = level_,
            .limit_ceiling = ceiling(),
            .network = false,
            .network_allowlist = holds_allowlist(),
            .allowed_hosts = options_.allowed_hosts};
  }

  description describe() override {
    description d;
    d.backend = backend_name();
    d.interpreter = python_.path;
    d.launcher = launcher_;
    d.limit_ceiling = ceiling();
    d.network = false;
    d.network_allowlist = holds_allowlist();
    d.allowed_hosts = options_.allowed_hosts;
    d.problems = python_.notes;
    d.run_as = identity_report();
    if (d.run_as->mode == run_as_mode::shared)
      d.problems.push_back(fmt::format("run_as: every execution runs as uid {}, so concurrent executions share it: "
                                       "they can signal and read one another and share one RLIMIT_NPROC count; "
                                       "leave run_as_uid unset for a uid per execution from run_as_range",
                                       d.run_as->first));
    auto lease = take_identity();
    if (!lease) {
      d.problems.push_back("probe: " + lease.error().message());
      return d;
    }
    host::session_plan plan = plan_for(probe_terms(), lease.value());
    plan.probe_only = true;
    auto outcome = host::run_session(plan, {});
    explain_launch_failure(outcome);
    if (lease.value()) {
      if (auto held_back = lease.value()->release()) d.problems.push_back(*held_back);
    }
    const auto& r = outcome.result;
    if (r.failure) d.problems.push_back(fmt::format("{}: {}", name_of(r.failure->kind), r.failure->message));
    // A refusal's message already names the grade's shortfalls, which the result also lists one
    // by one: each is said once.
    for (const auto& problem : r.problems)
      if (!r.failure || r.failure->message.find(problem) == std::string::npos) d.problems.push_back(problem);
    d.guarantees = r.guarantees;
    if (outcome.mechanisms) d.mechanisms = host::mechanism_names(*outcome.mechanisms);
    if (pool_) describe_pool(d);
    if (!pool_refused_.empty()) d.problems.push_back(pool_refused_);
    if (d.run_as->mode == run_as_mode::per_execution)
      d.mechanisms.push_back(fmt::format("identity: a uid and gid of its own per execution from {}..{} ({} free, "
                                         "{} held, {} stray; locks in {})",
                                         d.run_as->first, d.run_as->first + d.run_as->count - 1, d.run_as->free,
                                         d.run_as->held, d.run_as->stray, d.run_as->lock_dir));
    d.ready = !r.failure && r.isolation.has_value();
    if (r.isolation) d.isolation = *r.isolation;
    // Not ready must always say why: a probe child that died before its report leaves no failure.
    if (!d.ready && !r.failure)
      d.problems.push_back("probe: the child ended before it reported its containment, so nothing could be "
                           "graded (was it killed from outside?)");
    return d;
  }

  sandbox_result run(const run_request& request, std::stop_token stop) override {
    const auto offered = offer();
    if (auto refused = host::refusal_every_backend_makes(request, backend_name(), false, &offered))
      return std::move(*refused);
    execution_terms terms = request.terms;
    narrow(terms.limits, ceiling());  // a caller cannot exceed the backend's ceiling by skipping intersect_terms
    if (pool_) {
      if (auto ran = pool_->run(request, terms, stop)) return on_this_platform(std::move(*ran));
    }
    auto lease = take_identity();
    if (!lease) return host::refused_result(failure_kind::launch_failed, lease.error().message());
    host::session_plan plan = plan_for(terms, lease.value());
    host::add_request(plan, request);
    auto outcome = host::run_session(plan, std::move(stop));
    explain_launch_failure(outcome);
    auto result = std::move(outcome.result);
    // The session has ended: the launcher killed and reaped the tree and the host swept.
    if (lease.value()) {
      if (auto held_back = lease.value()->release()) result.problems.push_back(*held_back);
    }
    result.unavailable_bindings = request.unavailable_bindings;
    return on_this_platform(std::move(result));
  }

 private:
  const char* backend_name() const { return name_.c_str(); }

  /// A result that says how strong its grades could be here (the platform's honest limits).
  sandbox_result on_this_platform(sandbox_result result) const {
    result.strongest_grades = host::strongest_grades_of(name_);
    return result;
  }

  /// An ISOLATED launch refused while making its namespaces says which host setting refused them,
  /// when one did: EPERM from sethostname names neither AppArmor nor a sysctl.
  void explain_launch_failure(host::session_outcome& outcome) const {
#ifdef __linux__
    auto& failure = outcome.result.failure;
    const auto& error = outcome.launch_error;
    if (level_ != isolation_level::isolated || !error || !failure || failure->kind != failure_kind::launch_failed)
      return;
    const auto stage = error->stage.known();
    if (!stage || !host::namespace_setup_stage(*stage)) return;
    if (auto cause = userns_refused_by(static_cast<int>(error->error_number), launcher_))
      failure->message.append(", because ").append(*cause);
#else
    (void)outcome;
#endif
  }

  sandbox_limits ceiling() const { return overlay(local_builtin_ceiling, options_.limit_ceiling); }

  execution_terms probe_terms() const {
    execution_terms terms;
    terms.limits = ceiling();
    terms.limits.wall_seconds = std::min(terms.limits.wall_seconds.value, 10.0);
    return terms;
  }

  /// One prepared sandbox's launch: the ceiling, graded at the backend's own level, and the
  /// identity it holds until its execution has ended.
  result<host::preparation> prepare() const {
    PSYCH_TRY(auto lease, take_identity());
    execution_terms terms;
    terms.isolation = level_;
    terms.limits = ceiling();
    return host::preparation{plan_for(terms, lease), std::move(lease)};
  }

  void describe_pool(description& d) const {
    const auto pool = pool_->report();
    d.mechanisms.push_back(fmt::format("prepared: {} of {} sandboxes waiting, each used once (claimed {}, built on "
                                       "request {}, retired {}; at most {} s old)",
                                       pool.ready, pool.size, pool.claimed, pool.missed, pool.retired,
                                       options_.pool.max_age_seconds));
    if (!pool.last_clean_up_problem.empty()) d.problems.push_back("prepared: " + pool.last_clean_up_problem);
    if (!pool.last_failure.empty())
      d.problems.push_back("prepared: the pool cannot prepare a sandbox (" + pool.last_failure +
                           "); executions are built on request until it can");
  }

  /// The uid one execution runs as, held until release(); null when the worker is not root.
  result<std::optional<host::uid_lease>> take_identity() const {
    if (!identities_) return std::optional<host::uid_lease>{};
    PSYCH_TRY(auto lease, identities_->acquire());
    return std::optional<host::uid_lease>(std::move(lease));
  }

  run_as_report identity_report() const {
    if (identities_) return identities_->report();
    return {.mode = run_as_mode::worker, .first = worker_uid(), .count = 1, .free = 0, .held = 0, .stray = 0, .lock_dir = {}};
  }

  host::session_plan plan_for(const execution_terms& terms, const std::optional<host::uid_lease>& identity) const {
    host::session_plan plan;
    plan.launcher_path = launcher_;
    plan.attempt = level_;
    plan.interpreter = python_.path;
    plan.terms = terms;
    if (identity) plan.run_as = identity->identity();
    plan.allow_same_uid = options_.allow_same_uid;
    plan.environment = environment_;
    plan.temp_root = options_.temp_root;
    return plan;
  }

  local_sandbox_options options_;
  std::string name_;
  std::string launcher_;
  host::interpreter_choice python_;
  std::map<std::string, std::string> environment_;
  isolation_level level_;
  std::shared_ptr<host::uid_pool> identities_;
  std::string pool_refused_;  ///< why a configured pool is off
  std::unique_ptr<host::prepared_pool> pool_;  ///< last: its thread calls prepare(), so it goes first
};

std::string same_uid_guidance() {
#ifdef _WIN32
  return "the Windows launcher runs the child as the worker's own account (Windows has no uid to drop to); pass "
         "allow_same_uid=true to accept identity: unavailable";
#else
  return fmt::format(
      "the worker runs as uid {} (not root), so the child would run as the worker's own uid; run the worker as "
      "root so the child drops to a dedicated run_as uid, or pass allow_same_uid=true to accept identity: "
      "unavailable",
      worker_uid());
#endif
}

}  // namespace

namespace {

/// A local backend as found on this host: what detect_local_backends() reports,
/// and, when it is available, how to build it from what the search resolved.
struct candidate {
  backend_info info;
  std::function<result<std::unique_ptr<sandbox>>()> build;
  bool elsewhere = false;  ///< another platform's backend: listed, never tried
};

#ifdef __linux__
/// Whether this process may create the namespaces an ISOLATED execution needs, tried in a child
/// that makes them and exits. nullopt: it can; otherwise why not, with guidance.
std::optional<std::string> user_namespaces_unavailable(std::string_view launcher) {
  constexpr int flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
                        CLONE_NEWCGROUP;
  const pid_t child = ::fork();  // only unshare and _exit run in it: safe in a threaded host
  if (child < 0) return fmt::format("fork: {}", std::strerror(errno));
  if (child == 0) ::_exit(::unshare(flags) == 0 ? 0 : (errno & 0x7f) + 1);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return std::nullopt;
  const int error = WIFEXITED(status) ? WEXITSTATUS(status) - 1 : 0;
  if (auto cause = error ? userns_refused_by(error, launcher) : std::nullopt)
    return fmt::format("this host does not let psych create user namespaces (unshare: {}), because {}; or use a "
                       "container or a remote sandbox service for isolation=isolated",
                       std::strerror(error), *cause);
  return fmt::format("this host does not let psych create user namespaces (unshare: {}); enable them "
                     "(sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0, or the "
                     "container's seccomp/AppArmor profile), or use a container or a remote sandbox service "
                     "for isolation=isolated",
                     error ? std::strerror(error) : "the probe was killed");
}
#endif

/// Why a backend of this platform, whose launcher and interpreter were found, cannot run here;
/// nullopt: it can.
std::optional<std::string> unavailable_here(const host::local_backend_kind& kind, const local_sandbox_options& options,
                                            bool probe_namespaces, std::string_view launcher) {
  if (kind.isolation == isolation_level::isolated) {
#ifdef __linux__
    return probe_namespaces ? user_namespaces_unavailable(launcher) : std::nullopt;
#else
    (void)probe_namespaces;
    (void)launcher;
    return fmt::format("{} has no ISOLATED level on {}", kind.launcher, kind.platform);
#endif
  }
  if (!worker_is_root() && !options.allow_same_uid) return same_uid_guidance();
  return std::nullopt;
}

/// Who the child runs as, for deciding whether it can reach the interpreter: the configured
/// uid, or (a uid per execution) the range's first, whose rights every uid of a range reserved
/// for psych shares; an unprivileged worker's child is the worker itself, with its groups.
/// None on Windows, where the child is the worker's own account.
std::optional<host::accessor> child_identity(const local_sandbox_options& options) {
#ifdef _WIN32
  (void)options;
  return std::nullopt;
#else
  if (worker_is_root()) {
    if (options.run_as_uid)
      return host::accessor{*options.run_as_uid, {options.run_as_gid.value_or(*options.run_as_uid)}};
    return host::accessor{options.run_as_range.first, {options.run_as_range.first}};
  }
  host::accessor self{static_cast<std::int64_t>(::getuid()), {static_cast<std::int64_t>(::getgid())}};
  std::vector<gid_t> groups(static_cast<std::size_t>(std::max(::getgroups(0, nullptr), 0)));
  const int n = groups.empty() ? 0 : ::getgroups(static_cast<int>(groups.size()), groups.data());
  for (int i = 0; i < n; ++i) self.gids.push_back(groups[static_cast<std::size_t>(i)]);
  return self;
#endif
}

/// Where a root worker's children get their uid: one per execution from the range, or the one
/// configured uid. Null for a worker that is not root: its child keeps the worker's uid.
result<std::shared_ptr<host::uid_pool>> identities_for(const local_sandbox_options& options) {
  if (!worker_is_root()) return std::shared_ptr<host::uid_pool>{};
  if (options.run_as_uid)
    return host::uid_pool::shared(*options.run_as_uid, options.run_as_gid.value_or(*options.run_as_uid),
                                  options.run_as_range.lock_dir);
  return host::uid_pool::per_execution(options.run_as_range);
}

/// `probe_namespaces`: whether to find out now, in a child, that user namespaces can be made. A
/// sandbox whose first run is its probe (probe_at_open=false) finds out from that run instead.
/// Every platform's backends are listed; another platform's are never available here.
std::vector<candidate> local_candidates(const local_sandbox_options& options, bool probe_namespaces = true) {
  auto launcher = host::find_launcher(options.launcher_path);
  auto python = host::resolve_interpreter(options.python_bin, child_identity(options));
  const auto builder = [&](std::string_view name, isolation_level level) {
    return [options, name = std::string(name), path = launcher.value(), interpreter = python.value(),
            level]() -> result<std::unique_ptr<sandbox>> {
      PSYCH_TRY(auto identities, identities_for(options));
      return std::unique_ptr<sandbox>(
          std::make_unique<launcher_sandbox>(options, name, path, interpreter, level, std::move(identities)));
    };
  };
  std::vector<candidate> found;
  for (const auto& kind : host::local_backend_kinds) {
    if (kind.platform != host::host_platform()) continue;
    candidate here{{std::string(kind.name), kind.isolation, false, {}}, nullptr};
    if (!launcher) here.info.reason = launcher.error().message();
    else if (!python) here.info.reason = python.error().message();
    else if (auto why_not = unavailable_here(kind, options, probe_namespaces, launcher.value()))
      here.info.reason = *why_not;
    else {
      here.info.available = true;
      here.info.reason = kind.isolation == isolation_level::isolated
                             ? fmt::format("{} runs {} in user, mount, pid, net, ipc, uts and cgroup namespaces",
                                           launcher.value(), python.value().path)
                             : fmt::format("{} runs {}", launcher.value(), python.value().path);
      here.build = builder(kind.name, kind.isolation);
    }
    found.push_back(std::move(here));
  }
  for (auto& elsewhere : host::other_platforms_backends()) found.push_back({std::move(elsewhere), nullptr, true});
  return found;
}

/// probe_at_open=false: the candidates that could run, strongest first, tried by the first
/// runs. Once one started a program it is the sandbox; until then a run that failed before its
/// program was sent moves on to the next candidate with the same request.
class probed_by_first_run final : public sandbox {
 public:
  explicit probed_by_first_run(std::vector<candidate> candidates, std::unique_ptr<sandbox> first)
      : candidates_(std::move(candidates)), current_(std::move(first)) {}

  backend_offer offer() const override { return current_->offer(); }
  description describe() override { return current_->describe(); }

  sandbox_result run(const run_request& request, std::stop_token stop) override {
    if (settled_.load()) return current_->run(request, std::move(stop));
    std::lock_guard one_at_a_time(choosing_);
    std::vector<std::string> passed_over;
    for (;;) {
      auto result = current_->run(request, stop);
      const bool not_started = result.failure && (result.failure->kind == failure_kind::launch_failed ||
                                                  result.failure->kind == failure_kind::isolation_unavailable);
      if (!not_started || next_ >= candidates_.size() || stop.stop_requested()) {
        if (!not_started) settled_.store(true);
        result.problems.insert(result.problems.begin(), passed_over.begin(), passed_over.end());
        return result;
      }
      passed_over.push_back(fmt::format("{}: passed over: {}", candidates_[next_ - 1].info.name, result.failure->message));
      auto next = candidates_[next_++].build();
      if (!next) {
        result.problems.insert(result.problems.begin(), passed_over.begin(), passed_over.end());
        return result;
      }
      current_ = std::move(next).value();
    }
  }

 private:
  std::vector<candidate> candidates_;
  std::size_t next_ = 1;  ///< the candidate after current_'s
  std::unique_ptr<sandbox> current_;
  std::mutex choosing_;
  std::atomic<bool> settled_{false};
};

}  // namespace


std::vector<backend_info> detect_local_backends(const local_sandbox_options& options) {
  std::vector<backend_info> infos;
  for (auto& found : local_candidates(options)) infos.push_back(std::move(found.info));
  return infos;
}

result<std::unique_ptr<sandbox>> local_sandbox(const local_sandbox_options& options) {
  PSYCH_TRY(validate_limits(options.limit_ceiling));
  if (options.allowed_hosts)
    if (auto hosts = canonical_host_list(*options.allowed_hosts); !hosts)
      return fail_with(error_kind::invalid_argument, "allowed_hosts: " + hosts.error().detail);
  auto candidates = local_candidates(options, options.probe_at_open);
  // The strongest first: a caller asking for process gets isolated when it is there.
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& a, const auto& b) { return a.info.isolation > b.info.isolation; });
  if (options.backend) {
    const auto pinned = [&](const candidate& found) { return found.info.name == *options.backend; };
    if (std::none_of(candidates.begin(), candidates.end(), pinned)) {
      std::vector<std::string> names;
      for (const auto& found : candidates) names.push_back(found.info.name);
      return fail_with(error_kind::sandbox_setup, fmt::format("no local backend is named {:?}; the local backends are {}",
                                                              *options.backend, fmt::join(names, ", ")));
    }
    std::erase_if(candidates, [&](const candidate& found) { return !pinned(found); });
  } else {
    // Named in a refusal only when pinned: a backend of another platform explains nothing here.
    std::erase_if(candidates, [](const candidate& found) { return found.elsewhere; });
  }
  std::string why = fmt::format("no local backend reaches isolation={}", name_of(options.isolation));
  if (options.isolation == isolation_level::isolated && host::host_platform() == "macOS")
    why.append(" (macOS cannot cap a program's memory, and its seatbelt profile is no boundary a child can prove: "
               "use ContainerSandbox, or a remote sandbox service on a Linux host, for isolation=isolated)");
  if (!options.probe_at_open) {
    std::erase_if(candidates, [&](const candidate& found) {
      if (found.info.isolation >= options.isolation && found.info.available) return false;
      why.append(fmt::format("; {}: {}", found.info.name,
                             found.info.available ? "does not reach it" : found.info.reason));
      return true;
    });
    if (candidates.empty()) return fail_with(error_kind::sandbox_setup, why);
    PSYCH_TRY(auto first, candidates.front().build());
    return std::unique_ptr<sandbox>(std::make_unique<probed_by_first_run>(std::move(candidates), std::move(first)));
  }
  for (auto& found : candidates) {
    if (found.info.isolation < options.isolation) continue;
    if (!found.info.available) {
      why.append(fmt::format("; {}: {}", found.info.name, found.info.reason));
      continue;
    }
    auto built = found.build();
    if (!built) {
      why.append(fmt::format("; {}: {}", found.info.name, built.error().message()));
      continue;
    }
    // What the probe observed decides, not what was found on disk: a backend whose probe fails
    // would fail every execution the same way, so it is never handed back.
    const auto probed = built.value()->describe();
    if (probed.ready && probed.isolation >= options.isolation) return std::move(built).value();
    std::string problems;
    for (const auto& problem : probed.problems) problems.append(problems.empty() ? "" : "; ").append(problem);
    // Only a ready probe reached a level; a refused one reached none.
    why.append(fmt::format("; {}: not ready{}: {}", found.info.name,
                           probed.ready ? fmt::format(" ({} reached)", name_of(probed.isolation)) : "",
                           problems.empty() ? "the probe reported nothing" : problems));
  }
  return fail_with(error_kind::sandbox_setup, why);
}

}  // namespace psych
