#pragma once
// Spawning the launcher with the contract's descriptor layout, and holding
// it by pidfd (on Windows its process handle) so that waiting for it and killing it can never hit
// a reused pid.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "execution/execution_dirs.hpp"
#include "os/os_handle.hpp"
#include "psych/protocol/frames.hpp"
#include "psych/reports.hpp"
#include "psych/result.hpp"

namespace psych::host {

/// Where a launcher that attaches over loopback TCP connects, and what it proves (its environment's
/// PSYCH_HOST_PORT and PSYCH_HOST_SECRET; docs/contract.md, "Channels on Windows").
struct loopback_attach_address {
  std::uint16_t port = 0;
  std::string secret;
};

struct launcher_fds {
  os_handle stdout_write = no_os_handle;  ///< becomes fd 1
  os_handle stderr_write = no_os_handle;  ///< becomes fd 2
  int control = -1;  ///< becomes fd 3; -1 when the launcher attaches over loopback (always on Windows)
  int channel = -1;  ///< becomes fd 4; -1 when the launcher attaches over loopback (always on Windows)
  /// becomes fd 5 (protocol::egress_handover_fd) for network=allowlist: where the launcher sends the
  /// egress proxy's listeners. -1 otherwise.
  int egress_handover = -1;
  /// Set instead of control and channel for a starter that attaches_over_loopback().
  std::optional<loopback_attach_address> attach;
};

struct launcher_process {
  pid_t pid = -1;
  os_handle pidfd = no_os_handle;  ///< owned by the caller
};

/// The launcher as this host's child: fds 1-4 as `fds` has them, or with fds.attach the loopback
/// address in its environment (PSYCH_HOST_PORT, PSYCH_HOST_SECRET) and only 0-2.
result<launcher_process> spawn_launcher(const std::string& launcher_path, const launcher_fds& fds);

/// Exit status of a launcher whose pidfd became readable; -1 if unknown.
int reap_launcher(const launcher_process& process);

/// How a backend starts its launcher and ends it: as this host's child (local_launcher), or inside
/// a container that a container runtime starts (container_starter.hpp). The session's part is the
/// same for every one: it speaks the contract over the descriptors it handed over and waits on the
/// process returned.
class launcher_starter {
 public:
  virtual ~launcher_starter() = default;
  /// Starts the launcher with `fds` as its 1-4, and returns the process of this host whose exit
  /// is the launcher's end (the session reaps it).
  virtual result<launcher_process> start(const launcher_fds& fds, const execution_dirs& dirs) = 0;
  /// Ends the launcher at once, wherever it runs, after the session has SIGKILLed `process`
  /// (which is all a launcher that is this host's child needs).
  virtual void kill(const launcher_process& /*process*/) {}
  /// What the starter applied itself (a container's namespaces, its identity), added to the
  /// launcher's own report before grading. Grading still needs the child to observe each.
  virtual void add_mechanisms(mechanism_report& /*report*/) const {}
  /// The process start() returned has been reaped with `status` (its exit status, -1 unknown).
  virtual void reaped(int /*status*/) {}
  /// Whether the starter gives the child its identity (a container runtime's --user): the
  /// session's run_as is then what grading expects, and the launcher keeps the uid it runs as.
  [[nodiscard]] virtual bool sets_identity() const { return false; }
  /// Whether its launcher connects to the host's loopback listener for control and the channel
  /// (the Windows launcher's transport) instead of inheriting them as fds 3 and 4.
  [[nodiscard]] virtual bool attaches_over_loopback() const { return false; }
  /// The launch frame as the launcher's platform names things: its paths (a Windows launcher's
  /// drive letters) and the variables that point at the execution's directories.
  virtual void adapt_launch(protocol::launch_frame& /*frame*/) const {}
};

/// The launcher as this host's child, from its path (spawn_launcher). On Windows it attaches over
/// loopback, the only transport psych-launch-windows.exe has.
class local_launcher final : public launcher_starter {
 public:
  explicit local_launcher(std::string path) : path_(std::move(path)) {}
  result<launcher_process> start(const launcher_fds& fds, const execution_dirs&) override {
    return spawn_launcher(path_, fds);
  }
#ifdef _WIN32
  [[nodiscard]] bool attaches_over_loopback() const override { return true; }
  /// Windows programs take their temporary directory from TEMP and TMP, not TMPDIR.
  void adapt_launch(protocol::launch_frame& frame) const override {
    frame.environment["TEMP"] = frame.environment["TMP"] = frame.tmp_dir;
  }
#endif

 private:
  std::string path_;
};

}  // namespace psych::host
