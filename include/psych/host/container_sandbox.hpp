#pragma once
// The container backend: the same launcher, started inside a container by podman or docker, and
// graded like every other backend from what the child observes (docs/container-backend.md).
// Nothing is ever pulled: a missing image is a not-ready backend with the command that builds it.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "psych/host/sandbox.hpp"

namespace psych {

struct container_sandbox_options {
  /// "podman" or "docker" (looked up on PATH), or a path to either; nullopt: podman, then docker.
  std::optional<std::string> runtime;
  /// A local image: a name[:tag] or a digest reference (name@sha256:…), which is reported as such.
  std::string image = "localhost/psych-python:bookworm";
  /// The interpreter inside the image.
  std::string container_python_bin = "/usr/bin/python3";
  /// As local_sandbox_options::limit_ceiling: the most any execution may have.
  limit_caps limit_ceiling;
  /// Host variables the child may see, by name. Nothing else reaches the container.
  std::vector<std::string> env_allowlist;
  /// The deployment's cap on network=allowlist, as local_sandbox_options::allowed_hosts.
  std::optional<std::vector<std::string>> allowed_hosts;
  /// As local_sandbox_options: one fixed uid for every execution, or (unset) a uid of its own per
  /// execution from run_as_range, shared with the local backends' allocator.
  std::optional<std::int64_t> run_as_uid;
  std::optional<std::int64_t> run_as_gid;
  uid_range run_as_range;
  /// Appended to `run` after psych's own flags. Only flags that name, label or narrow the container
  /// are accepted (--hostname, --annotation, --label, the CPU and blkio shares and sets,
  /// --memory-reservation, --shm-size, --stop-timeout, --tz); anything else is refused at
  /// construction with a named error, since it could undo or widen what psych set.
  std::vector<std::string> extra_run_args;
  /// The launcher that is bind-mounted into the container (statically linked); default as for
  /// the local backends.
  std::optional<std::string> launcher_path;
  /// Where the per-execution directories and the channel's socket directory are made.
  std::string temp_root = "/tmp";
  /// As local_sandbox_options::probe_at_open. true: container_sandbox() runs a probe container
  /// (describe()) and refuses a backend that is not ready. false: the first run() is the probe —
  /// its child reports its containment before the program is sent, graded as every execution's
  /// is — and a run that cannot start its container says why the runtime or image is not usable.
  /// For a process that runs one program (`psych run`), which would otherwise start two containers.
  bool probe_at_open = true;
};

/// The container runtime and image as found on this host: which runtime, its version, whether the
/// image is present, and what is wrong (with the command that fixes it).
struct container_runtime_report {
  bool available = false;
  std::string runtime;  ///< "podman" or "docker"
  std::string path;
  std::string version;
  std::string image;
  bool image_present = false;
  std::string image_id;      ///< the local image's id (sha256:…)
  std::string image_digest;  ///< the digest a name@sha256 reference names, when it is one
  std::string problem;       ///< empty when available
};

container_runtime_report detect_container_runtime(const container_sandbox_options& options = {});

/// A container sandbox, or a sandbox_setup error naming what is missing (never a pull). Also an
/// error for extra_run_args that would widen psych's flags, and for a worker that is not root
/// (rootless containers map uids through the worker's own range: not supported yet).
result<std::unique_ptr<sandbox>> container_sandbox(const container_sandbox_options& options = {});

/// Why `args` may not be appended to a container `run`, or nullopt when they may.
std::optional<std::string> widening_run_argument(const std::vector<std::string>& args);

}  // namespace psych
