#pragma once
// Starting one execution's launcher inside a container (docs/container-backend.md): the channel's
// socket and its token, the container runtime's command line, and ending the container on every
// path. The session sees a launcher_starter; what it speaks afterwards is the contract unchanged.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/container/container_runtime.hpp"
#include "execution/launcher_process.hpp"
#include "os/posix.hpp"
#include "psych/core.hpp"
#include "psych/protocol/frames.hpp"

namespace psych::host {

struct container_launch {
  container_runtime runtime;
  std::string image;
  std::string launcher_path;  ///< on the host; bind-mounted read-only into the container
  protocol::identity child;   ///< --user
  sandbox_limits limits;      ///< memory and process count become the container's cgroup limits
  std::vector<std::string> extra_run_args;
  std::vector<std::string> image_root_entries;  ///< from the image, for grading the filesystem
  std::string temp_root = "/tmp";
  std::string execution_id;
};

class container_starter final : public launcher_starter {
 public:
  explicit container_starter(container_launch launch);
  /// Removes the container if it is still there, and the socket directory.
  ~container_starter() override;
  container_starter(const container_starter&) = delete;
  container_starter& operator=(const container_starter&) = delete;

  result<launcher_process> start(const launcher_fds& fds, const execution_dirs& dirs) override;
  void kill(const launcher_process& process) override;
  void add_mechanisms(mechanism_report& report) const override;
  void reaped(int status) override;
  /// The runtime's --user gives the child its uid; the launcher inside keeps it.
  [[nodiscard]] bool sets_identity() const override { return true; }

  /// Where the launcher is inside every container, and where the channel's directory appears.
  static constexpr const char* launcher_inside = "/run/psych/launch";
  static constexpr const char* channel_inside = "/run/psych/channel";

 private:
  result<void> make_channel_directory();
  std::vector<std::string> run_arguments(const execution_dirs& dirs) const;
  /// Waits for the launcher's connection and hands the descriptors over: a connection that does
  /// not present the token first is dropped, and after the good one the socket is gone.
  result<void> hand_over(const launcher_fds& fds, int runtime_pidfd);
  std::string runtime_stderr() const;

  container_launch launch_;
  std::string name_;
  std::string token_;
  std::string socket_dir_;
  unique_fd listener_;
  unique_fd stderr_file_;  ///< the runtime's stderr: why a container did not start
  bool may_linger_ = false;  ///< the container may still exist: remove it explicitly
};

}  // namespace psych::host
