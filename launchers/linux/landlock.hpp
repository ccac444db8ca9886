#pragma once
// Landlock: the filesystem confinement of the PROCESS level, and defence in
// depth for the ISOLATED level (inside the mount namespace after pivot_root).
// The ruleset handles every access right the negotiated ABI knows and allows
// only what a rule names, so at ISOLATED a path the mount namespace exposes by
// mistake is still closed, and at PROCESS the host's files outside the
// interpreter, the workspace and the temp dir are out of reach. Without a
// network grant, ABI 4 also denies every TCP bind and connect (no net rule is
// ever added); with ABI 6 the program can neither reach abstract unix sockets
// nor signal processes outside its own Landlock domain.
//
// Built in two steps: prepare() resolves the paths and builds the ruleset in
// a process that may allocate (the launcher at PROCESS; the sandbox's init
// after pivot_root at ISOLATED, so the paths are as seen inside the new
// root); restrict_self() is the one call the child makes between fork and
// exec, after PR_SET_NO_NEW_PRIVS.
#include <cstdint>
#include <string>
#include <vector>

#include "setup_error.hpp"
#include "psych/isolation.hpp"

namespace psych::launcher {

/// The ABI the kernel offers: 0 when Landlock is absent or disabled (ENOSYS/EOPNOTSUPP), never an error.
int landlock_abi() noexcept;

/// The ABI a ruleset prepared here uses: the kernel's, capped at the newest this file knows.
int landlock_abi_used() noexcept;

/// What the sandbox may touch, as paths in the calling process's root. A rule covers the file or
/// the whole tree beneath a directory; on a file, only the file rights of its category apply.
struct landlock_paths {
  std::vector<std::string> read_execute;  ///< "/usr", "/lib", "/etc/ld.so.cache": read files and dirs, execute
  std::vector<std::string> read_write;    ///< "/workspace", "/tmp": everything but making char/block devices
  std::vector<std::string> devices;       ///< "/dev/null", "/dev/zero": read and write (+ device ioctls), no execute
  std::vector<std::string> read_only;     ///< "/proc": read files and dirs
  std::vector<std::string> list_only;     ///< "/": list directories beneath, read no file through it
  /// unrestricted: TCP bind and connect are not handled, so the grant is not undone here.
  /// allowlist: both handled, and connect allowed to egress_port alone (psych's proxy).
  network_access network = network_access::none;
  std::uint16_t egress_port = 0;
};

/// One prepared ruleset: owns its fd (O_CLOEXEC, so the program never holds it). Move-only.
class landlock_ruleset {
 public:
  /// Opens each path (O_PATH), adds its rule and closes it again; only the ruleset fd stays.
  /// Handles every right the ABI knows (capped at the newest this file knows, 7): the file-system
  /// rights, with REFER (ABI 2), TRUNCATE (3) and IOCTL_DEV (5); without a network grant TCP bind
  /// and connect (4), with no rule, so both are always denied (with an allowlist, one rule: connect
  /// to the proxy's port); abstract unix sockets and signals
  /// scoped (6).
  /// A path that does not exist (ENOENT, ENOTDIR) is skipped and listed in skipped(); any other
  /// failure (an open, fstat or landlock_add_rule error) fails at stage "landlock".
  /// Without Landlock it is an empty ruleset: abi() 0, and restrict_self() does nothing, so the
  /// caller decides whether its absence is acceptable. Works in any process.
  static setup_result<landlock_ruleset> prepare(const landlock_paths& paths);

  landlock_ruleset(landlock_ruleset&& other) noexcept;
  landlock_ruleset& operator=(landlock_ruleset&& other) noexcept;
  landlock_ruleset(const landlock_ruleset&) = delete;
  landlock_ruleset& operator=(const landlock_ruleset&) = delete;
  ~landlock_ruleset();

  /// The ABI the ruleset was built for (0: none).
  int abi() const noexcept { return abi_; }

  /// The paths prepare() skipped because they do not exist.
  const std::vector<std::string>& skipped() const noexcept { return skipped_; }

  /// In the child between fork and exec: landlock_restrict_self(fd, 0). The caller must have set
  /// PR_SET_NO_NEW_PRIVS first (without it the kernel refuses unless the caller has CAP_SYS_ADMIN).
  /// Allocates nothing when it succeeds; a failure formats its message, as every child step does.
  setup_result<void> restrict_self() const;

 private:
  landlock_ruleset() = default;

  int fd_ = -1;
  int abi_ = 0;
  std::vector<std::string> skipped_;
};

/// What a ruleset of that ABI handles, for reports: "landlock: ABI 7 (filesystem, TCP
/// bind/connect denied, abstract unix sockets and signals scoped)"; "landlock: unavailable" for 0.
/// With a network grant TCP is not mentioned: it is not handled.
std::string describe_landlock(int abi, network_access network = network_access::none);

}  // namespace psych::launcher
