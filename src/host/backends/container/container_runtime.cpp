#include "backends/container/container_runtime.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <string_view>

#include <fmt/format.h>

namespace psych::host {
namespace {

constexpr std::array<const char*, 4> search_dirs = {"/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin"};

std::optional<std::string> on_path(const std::string& name) {
  for (const char* dir : search_dirs) {
    const auto path = std::string(dir) + "/" + name;
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::string> container_runtime::environment() {
  return {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
}

result<command_output> container_runtime::run(std::vector<std::string> args, std::chrono::milliseconds limit) const {
  args.insert(args.begin(), path);
  return run_command(args, environment(), limit);
}

void container_runtime::remove(const std::string& container) const {
  (void)run({"rm", "--force", "--time", "0", "--ignore", container}, std::chrono::seconds(30));
}

std::vector<std::string> container_runtime::image_root_entries(const std::string& image) const {
  // podman can mount an image's root read-only without a container; docker cannot, and there the
  // grade of the filesystem stays short of enforced (docs/container-backend.md).
  if (name != "podman") return {};
  auto mounted = run({"image", "mount", image});
  if (!mounted || mounted.value().exit_code != 0) return {};
  const auto root = without_trailing_space(mounted.value().stdout_text);
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) names.push_back(entry.path().filename().string());
  (void)run({"image", "unmount", image});
  std::sort(names.begin(), names.end());
  return names;
}

result<container_runtime> find_container_runtime(const std::optional<std::string>& wanted) {
  std::vector<std::string> candidates = wanted ? std::vector<std::string>{*wanted}
                                               : std::vector<std::string>{"podman", "docker"};
  std::string tried;
  for (const auto& candidate : candidates) {
    const bool is_path = candidate.find('/') != std::string::npos;
    const auto path = is_path ? (::access(candidate.c_str(), X_OK) == 0 ? std::optional(candidate) : std::nullopt)
                              : on_path(candidate);
    tried.append(tried.empty() ? "" : ", ").append(candidate);
    if (!path) continue;
    const auto name = std::filesystem::path(*path).filename().string();
    if (name != "podman" && name != "docker") {
      return fail_with(error_kind::sandbox_setup,
                     fmt::format("container runtime {:?} is neither podman nor docker", candidate));
    }
    return container_runtime{name, *path};
  }
  return fail_with(error_kind::sandbox_setup,
                 fmt::format("no container runtime found (tried {}); install one (apt-get install podman runc) "
                             "and build the image with scripts/build-image",
                             tried));
}

}  // namespace psych::host

namespace psych {

std::optional<std::string> widening_run_argument(const std::vector<std::string>& args) {
  // An allowlist, not a list of what is dangerous: a runtime has too many ways to widen a
  // container (--privileged, --pod, --rootfs, --preserve-fds, --cgroups=disabled, --group-add, …),
  // and gains more with each release. These only name, label or narrow it. Each takes a value,
  // as NAME=VALUE or as the next argument; a bare word would be taken for the image.
  static constexpr std::array<std::string_view, 14> narrowing_flags = {
      "--hostname", "--annotation", "--label", "--cpus", "--cpu-shares", "--cpu-period", "--cpu-quota",
      "--cpuset-cpus", "--cpuset-mems", "--blkio-weight", "--memory-reservation", "--shm-size", "--stop-timeout",
      "--tz"};
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const auto equals = arg.find('=');
    const std::string_view flag = std::string_view(arg).substr(0, equals);
    if (std::find(narrowing_flags.begin(), narrowing_flags.end(), flag) == narrowing_flags.end()) {
      if (arg.starts_with("--env") || arg == "-e")
        return fmt::format("extra_run_args may not contain {:?}: the child's environment is built from "
                           "env_allowlist only",
                           arg);
      return fmt::format("extra_run_args may not contain {:?}: only flags that name, label or narrow the "
                         "container are accepted, never one that could undo or widen what psych sets "
                         "(docs/container-backend.md)",
                         arg);
    }
    if (equals == std::string::npos) ++i;  // its value, which is not a flag of its own
  }
  return std::nullopt;
}

}  // namespace psych
