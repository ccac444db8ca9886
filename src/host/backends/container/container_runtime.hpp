#pragma once
// The container runtime as psych drives it: which one, where, its commands, and the flags every
// container gets (container_starter.cpp). Only fixed commands of the host's run here.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "os/run_command.hpp"
#include "psych/result.hpp"

namespace psych::host {

struct container_runtime {
  std::string name;  ///< "podman" or "docker"
  std::string path;

  /// The environment the runtime's own commands get: a fixed PATH, nothing of the worker's.
  static std::vector<std::string> environment();
  /// `runtime args...`, waited for at most `limit`.
  [[nodiscard]] result<command_output> run(std::vector<std::string> args,
                                           std::chrono::milliseconds limit = std::chrono::seconds(30)) const;
  /// Kills and removes a container by name; quiet when it is already gone.
  void remove(const std::string& container) const;
  /// The names of top-level entries of the image's root, read from the image without running it;
  /// empty when the runtime cannot show it.
  [[nodiscard]] std::vector<std::string> image_root_entries(const std::string& image) const;
};

/// The runtime options name, or podman then docker from PATH.
result<container_runtime> find_container_runtime(const std::optional<std::string>& wanted);

}  // namespace psych::host
