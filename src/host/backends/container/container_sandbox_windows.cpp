// The container backend on Windows: not offered, and said so by name. It is POSIX by nature: the
// host hands the channel's descriptors into the container over a Unix socket (SCM_RIGHTS) and
// gives every execution a uid of its own, and the launcher inside is the Linux one
// (docs/container-backend.md). A Windows host reaches containers through the remote backend, a
// sandbox service on a Linux machine.
#include "psych/host/container_sandbox.hpp"

namespace psych {
namespace {

constexpr const char* not_on_windows =
    "the container backend needs a Linux or macOS host: it passes the sandbox's descriptors into the "
    "container over a Unix socket and gives each execution a uid of its own, which Windows has not; "
    "from Windows, use the remote backend (a sandbox service on a Linux machine, docs/serve.md)";

}  // namespace

container_runtime_report detect_container_runtime(const container_sandbox_options& options) {
  container_runtime_report report;
  report.image = options.image;
  report.problem = not_on_windows;
  return report;
}

result<std::unique_ptr<sandbox>> container_sandbox(const container_sandbox_options& options) {
  // The deployment's mistakes first, as on POSIX: they are wrong wherever the backend runs.
  PSYCH_TRY(validate_limits(options.limit_ceiling));
  if (auto widening = widening_run_argument(options.extra_run_args))
    return fail_with(error_kind::sandbox_setup, *widening);
  return fail_with(error_kind::sandbox_setup, not_on_windows);
}

}  // namespace psych
