#pragma once
// The Sandbox port: run() and describe(), and the local backends behind it.
// Nothing here names a tool registry: a sandbox receives a program and its
// terms, and returns a result.
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "psych/core.hpp"
#include "psych/host/bindings.hpp"
#include "psych/host/blob_store.hpp"
#include "psych/host/call_relay.hpp"
#include "psych/host/live_output.hpp"
#include "psych/host/run_log.hpp"

namespace psych {

/// Where a child's uid comes from.
enum class run_as_mode {
  per_execution,  ///< each execution its own uid/gid from a reserved range (a root worker's default)
  shared,         ///< every execution the one configured run_as_uid
  worker,         ///< the worker's own uid: it is not root, so there is nothing to drop to
};
PSYCH_ENUM_NAMES(run_as_mode, "per_execution", "shared", "worker");

/// Who the children of a root worker run as, and how many of those identities are free now.
struct run_as_report {
  run_as_mode mode = run_as_mode::worker;
  std::int64_t first = 0;  ///< the first uid (and gid) of the range, or the shared uid
  std::int64_t count = 0;
  std::int64_t free = 0;         ///< neither held by an execution nor used by a live process
  std::int64_t held = 0;         ///< held by a running execution, of this worker or another
  std::int64_t stray = 0;        ///< not held, but a process of that uid is alive: skipped
  std::string lock_dir;
};

/// What describe() reports: what this backend is, what it can prove, and
/// what is wrong with it, if anything. Produced by a fixed probe, never by
/// model-written code.
struct description {
  bool ready = false;
  isolation_level isolation = isolation_level::process;  ///< what the probe reached
  guarantee_grades guarantees;                             ///< as the probe observed them
  std::vector<std::string> mechanisms;                     ///< what the launcher applied
  std::vector<std::string> problems;                       ///< why not ready, or what grading saw
  sandbox_limits limit_ceiling;
  bool network = false;  ///< whether this backend can grant network
  /// Whether it can hold network=allowlist (docs/network.md): the program's namespace reaches only
  /// psych's egress proxy.
  bool network_allowlist = false;
  /// The configuration's cap on the hosts an allowlist may name; nullopt: none (docs/network.md).
  std::optional<std::vector<std::string>> allowed_hosts;
  std::string backend;      ///< e.g. "linux-process"
  std::string interpreter;  ///< the real interpreter the child runs
  std::string launcher;
  std::optional<run_as_report> run_as;  ///< nullopt: no probe ran

  /// The first term of every intersection.
  [[nodiscard]] backend_offer offer() const {
    return {.ready = ready, .isolation = isolation, .limit_ceiling = limit_ceiling, .network = network,
            .network_allowlist = network_allowlist,
            .allowed_hosts = allowed_hosts,
            .problems = problems};
  }
};

struct run_request {
  std::string program;
  execution_terms terms;
  std::string filename = "<program>";
  /// The tools the program may call (TOOLS, the aliases, call_tool), and the runtime's path to
  /// them. No invoker: the program has no bindings, whatever this lists.
  std::vector<binding> bindings;
  tool_invoker* invoker = nullptr;
  /// Set by a service that runs programs for a remote client (psych serve): the program's calls go
  /// to it as they arrive, unadmitted, and its answers go back; `invoker`, `budget` and `run` are
  /// then the client's business, not this host's. `bindings` still says what `run` offers.
  call_relay* relay = nullptr;
  /// Names the spec listed that resolve to nothing this turn: calling one is `unavailable_binding`,
  /// and the result lists them. run_code() (run_code.hpp) fills this and `bindings` per turn.
  std::vector<std::string> unavailable_bindings;
  /// The ceilings on this execution's calls: the profile's BindingBudget, narrowed by the tenant's
  /// policy (narrow()); a spec can neither raise nor carry it.
  binding_budget budget;
  /// The Run this execution belongs to: its log and what it spent before.
  run_account run;
  /// Where outputs, artifacts and large binding results are preserved, and whose they are.
  /// None: nothing is preserved (WHEN_AVAILABLE keeps previews; REQUIRED is refused up front).
  blob_store* blobs = nullptr;
  std::string tenant = "default";
  /// Where the program's stdout and stderr go while it runs, besides the result (live_output.hpp).
  /// None: they are in the result only.
  output_sink* live_output = nullptr;
};

/// The port. A run() never throws for anything the program did: failures,
/// limit hits and refusals come back inside the result.
class sandbox {
 public:
  virtual ~sandbox() = default;
  /// What this backend claims it can provide, without probing: the first
  /// term of an intersection when no describe() result is at hand. Every
  /// run() still checks the child's own report before sending the program.
  virtual backend_offer offer() const = 0;
  /// Runs the fixed probe and reports what it observed.
  virtual description describe() = 0;
  /// Runs one program. Requesting stop kills the tree and reports `cancelled`.
  virtual sandbox_result run(const run_request& request, std::stop_token stop = {}) = 0;
};

/// One local backend this host could offer.
struct backend_info {
  std::string name;
  isolation_level isolation = isolation_level::process;
  bool available = false;
  std::string reason;  ///< why not, with install guidance; or what it uses
};

/// A block of uids, and the gids of the same numbers, reserved for psych's children on this
/// host (as systemd's DynamicUser reserves one). Each execution of a root worker holds one of
/// them alone from start until its process tree is verified dead, so concurrent executions
/// cannot signal, trace or read one another and RLIMIT_NPROC counts one execution.
struct uid_range {
  std::int64_t first = 1'500'000;
  std::int64_t count = 1024;
  /// Where the per-uid lock files live (made 0700 if missing, and refused unless the worker
  /// owns it and nobody else may write it). Every worker that shares the range must name the
  /// same directory: the lock, not the process list, is what keeps two workers apart.
#ifdef __APPLE__
  std::string lock_dir = "/var/run/psych/uids";  // macOS has no /run
#else
  std::string lock_dir = "/run/psych/uids";
#endif
};

/// What a local backend allows in each dimension the deployment leaves unset in
/// local_sandbox_options::limit_ceiling: the spec's SandboxLimits values (10 s of CPU, 512 MiB of
/// address space, 10 MiB files, 64 processes, 30 s of wall clock).
inline constexpr sandbox_limits local_builtin_ceiling{};

/// Sandboxes prepared before their request (docs/pools.md): launched, contained and graded at
/// the backend's ceiling, then waiting; a request claims one, which is narrowed to its terms (and
/// graded again from what the child then observes) before its program is sent. Each is used by
/// exactly one execution and destroyed after it.
struct prepared_pool_options {
  std::size_t size = 0;             ///< sandboxes kept waiting; 0: off, each is built on request
  double max_age_seconds = 300;     ///< one unclaimed this long is destroyed and replaced
};

/// Where a local execution's directories are made unless the deployment names a place: /tmp on
/// POSIX; on Windows, where no fixed path is every account's, empty, which is the account's own
/// temporary directory (GetTempPathW's: %TMP%, else %TEMP%, else the profile's).
#ifdef _WIN32
inline constexpr const char* default_temp_root = "";
#else
inline constexpr const char* default_temp_root = "/tmp";
#endif

struct local_sandbox_options {
  /// The minimum level the sandbox must reach; nothing weaker is handed back.
  isolation_level isolation = isolation_level::process;
  /// The interpreter; default: the first real python3 on PATH (shims skipped).
  std::optional<std::string> python_bin;
  /// The backend's ceiling: the most any execution on it may have, whatever a policy, a spec or
  /// a profile says (offer() and describe() report it as limit_ceiling). A set dimension takes
  /// the place of local_builtin_ceiling's, up or down; an unset one keeps it. There is no
  /// separate default below the ceiling: a spec that asks nothing in a dimension gets "whatever
  /// the profile allows", which is this ceiling narrowed by the tenant's policy and the profile's
  /// hard_limits. A smaller everyday limit is a profile's hard limit (docs/runtime.md).
  limit_caps limit_ceiling;
  /// Host variables the child may see, by name. Nothing else is inherited.
  std::vector<std::string> env_allowlist;
  /// The deployment's cap on network=allowlist: no execution may reach a host beyond these
  /// patterns, whatever its spec and profile name (docs/network.md). nullopt: no cap of its own.
  std::optional<std::vector<std::string>> allowed_hosts;
  /// Accept a child that runs as the worker's own uid (identity: unavailable).
  bool allow_same_uid = false;

  // Deployment knobs beyond the spec's signature.
  /// Pin one backend by name ("linux-process", "linux-namespaces", "macos-process") instead of the
  /// strongest that reaches `isolation`: for tests and benchmarks of one backend, and deployments
  /// that must not change backend when a host gains a capability. It must still reach `isolation`.
  std::optional<std::string> backend;
  /// Default, in order: $PSYCH_LAUNCHER; the launcher of the package this program was built
  /// against (registered below); `../libexec/psych/psych-launch-linux` beside the running
  /// executable (how an installed `psych` finds its own). docs/runtime.md, "Installing".
  std::optional<std::string> launcher_path;
  /// One fixed uid a root worker drops to for every execution, instead of one per execution
  /// from run_as_range: concurrent executions then share it (they can signal one another and
  /// share RLIMIT_NPROC), and describe() says so. It still takes a shared lock in
  /// run_as_range.lock_dir, so a range allocator in another worker never hands it out beside it.
  std::optional<std::int64_t> run_as_uid;
  std::optional<std::int64_t> run_as_gid;  ///< default: run_as_uid
  /// Where each execution's own uid comes from when run_as_uid is unset.
  uid_range run_as_range;
  std::string temp_root = default_temp_root;  ///< where per-execution directories are made
  /// Prepared sandboxes for this backend; off by default.
  prepared_pool_options pool;
  /// How local_sandbox() knows a backend works. true: it runs a probe (describe()) before it
  /// hands the sandbox back, and a backend whose probe fails is passed over. false: the first
  /// run() is the probe — its own containment report is graded as every execution's is, and a
  /// backend that could not start it (launch_failed, isolation_unavailable) is passed over for
  /// the next, with the same request, nothing of the program having run. For a process that runs
  /// one program (`psych run`), which would otherwise start the sandbox twice.
  bool probe_at_open = true;
};

/// Where the package this program was built against put its launcher. psych's CMake package
/// (find_package(psych), and psych's own build tree) defines PSYCH_PACKAGE_LAUNCHER for every
/// program that links psych::host, as a path computed from where the package is installed now,
/// so a prefix can be moved; the registration below hands it to the library at start-up. The
/// library itself holds no path fixed at build time.
void register_package_launcher(const char* path) noexcept;

/// Every local backend of every platform, available or not, with the reason: another platform's
/// backend is listed as not available here.
std::vector<backend_info> detect_local_backends(const local_sandbox_options& options = {});

/// The strongest local backend reaching options.isolation, or a sandbox_setup
/// error with install guidance. Never something weaker; never installs anything.
result<std::unique_ptr<sandbox>> local_sandbox(const local_sandbox_options& options = {});

}  // namespace psych

#if defined(PSYCH_PACKAGE_LAUNCHER) && !defined(PSYCH_NO_PACKAGE_LAUNCHER)
namespace psych::detail {
namespace {
// One per translation unit that includes this header (internal linkage: no ODR question); each
// registers the same path before main() runs.
[[maybe_unused]] const bool package_launcher_registered = (register_package_launcher(PSYCH_PACKAGE_LAUNCHER), true);
}  // namespace
}  // namespace psych::detail
#endif
