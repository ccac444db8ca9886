// The container backend (docs/container-backend.md): the Linux launcher inside a container that a
// container runtime starts per execution, reached over the channel's socket (container_starter).
#include "psych/host/container_sandbox.hpp"

#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include "backends/backend_support.hpp"
#include "backends/container/container_runtime.hpp"
#include "backends/container/container_starter.hpp"
#include "execution/session.hpp"
#include "backends/uid_pool.hpp"

namespace psych {
namespace {

constexpr const char* backend_name = "container";

/// The digest a reference names (name@sha256:…), or empty.
std::string digest_of(const std::string& image) {
  const auto at = image.find('@');
  return at == std::string::npos ? std::string() : image.substr(at + 1);
}

class container_backend final : public sandbox {
 public:
  container_backend(container_sandbox_options options, host::container_runtime runtime, std::string launcher,
                    std::shared_ptr<host::uid_pool> identities, std::vector<std::string> image_root)
      : options_(std::move(options)), runtime_(std::move(runtime)), launcher_(std::move(launcher)),
        identities_(std::move(identities)), image_root_(std::move(image_root)),
        environment_(host::child_environment(options_.env_allowlist)) {}

  backend_offer offer() const override {
    // The container's network namespace (--network=none) holds only its loopback, where the
    // launcher makes the egress proxy's listeners: it holds an allowlist (docs/network.md).
    return {.ready = true,
            .isolation = isolation_level::isolated,
            .limit_ceiling = ceiling(),
            .network = false,
            .network_allowlist = true,
            .allowed_hosts = options_.allowed_hosts};
  }

  description describe() override {
    description d;
    d.backend = backend_name;
    d.interpreter = options_.container_python_bin;
    d.launcher = launcher_;
    d.limit_ceiling = ceiling();
    d.network = false;
    d.network_allowlist = true;
    d.allowed_hosts = options_.allowed_hosts;
    d.run_as = identities_->report();
    const auto found = detect_container_runtime(options_);
    d.mechanisms.push_back(fmt::format("runtime: {} {} ({}), image {} ({})", found.runtime, found.version, found.path,
                                       found.image, found.image_id.empty() ? "absent" : found.image_id));
    if (!found.available) {
      d.problems.push_back(found.problem);
      return d;
    }
    execution_terms terms;
    terms.limits = ceiling();
    terms.limits.wall_seconds = std::min(terms.limits.wall_seconds.value, default_wall_seconds);
    auto outcome = execute(terms, {}, true, {});
    const auto& r = outcome.result;
    if (r.failure) d.problems.push_back(fmt::format("{}: {}", name_of(r.failure->kind), r.failure->message));
    d.problems.insert(d.problems.end(), r.problems.begin(), r.problems.end());
    d.guarantees = r.guarantees;
    if (outcome.mechanisms) {
      auto names = host::mechanism_names(*outcome.mechanisms);
      d.mechanisms.insert(d.mechanisms.end(), names.begin(), names.end());
    }
    d.ready = !r.failure && r.isolation.has_value();
    if (r.isolation) d.isolation = *r.isolation;
    if (!d.ready && !r.failure)
      d.problems.push_back("probe: the child ended before it reported its containment, so nothing could be graded");
    return d;
  }

  sandbox_result run(const run_request& request, std::stop_token stop) override {
    const auto offered = offer();
    if (auto refused = host::refusal_every_backend_makes(request, backend_name, false, &offered))
      return std::move(*refused);
    execution_terms terms = request.terms;
    narrow(terms.limits, ceiling());
    auto result = execute(terms, request, false, std::move(stop)).result;
    result.unavailable_bindings = request.unavailable_bindings;
    if (!options_.probe_at_open && result.failure && result.failure->kind == failure_kind::launch_failed) {
      // No probe vouched for the runtime and the image: say which of them is missing, as it would.
      if (const auto found = detect_container_runtime(options_); !found.available)
        result.failure->message += "; " + found.problem;
    }
    return result;
  }

 private:
  sandbox_limits ceiling() const { return overlay(local_builtin_ceiling, options_.limit_ceiling); }

  host::session_outcome execute(const execution_terms& terms, const run_request& request, bool probe_only,
                                std::stop_token stop) {
    auto lease = identities_->acquire();
    if (!lease) {
      host::session_outcome refused_outcome;
      refused_outcome.result = host::refused_result(failure_kind::launch_failed, lease.error().message());
      return refused_outcome;
    }
    host::session_plan plan;
    plan.attempt = isolation_level::process;  // inside the container; the container is the boundary
    plan.interpreter = options_.container_python_bin;
    plan.terms = terms;
    plan.run_as = lease.value().identity();
    plan.environment = environment_;
    plan.temp_root = options_.temp_root;
    plan.probe_only = probe_only;
    host::add_request(plan, request);
    host::container_starter starter({.runtime = runtime_,
                                     .image = options_.image,
                                     .launcher_path = launcher_,
                                     .child = lease.value().identity(),
                                     .limits = terms.limits,
                                     .extra_run_args = options_.extra_run_args,
                                     .image_root_entries = image_root_,
                                     .temp_root = options_.temp_root,
                                     .execution_id = host::random_token()});
    plan.starter = &starter;
    auto outcome = host::run_session(plan, std::move(stop));
    if (auto held_back = lease.value().release()) outcome.result.problems.push_back(*held_back);
    return outcome;
  }

  container_sandbox_options options_;
  host::container_runtime runtime_;
  std::string launcher_;
  std::shared_ptr<host::uid_pool> identities_;
  std::vector<std::string> image_root_;
  std::map<std::string, std::string> environment_;
};

}  // namespace

container_runtime_report detect_container_runtime(const container_sandbox_options& options) {
  container_runtime_report report;
  report.image = options.image;
  report.image_digest = digest_of(options.image);
  auto runtime = host::find_container_runtime(options.runtime);
  if (!runtime) {
    report.problem = runtime.error().message();
    return report;
  }
  report.runtime = runtime.value().name;
  report.path = runtime.value().path;
  auto version = runtime.value().run({"version", "--format", "{{.Client.Version}}"}, std::chrono::seconds(20));
  if (!version || version.value().exit_code != 0) {
    report.problem = fmt::format("{} does not answer `version`: {}", report.path,
                                 version ? host::without_trailing_space(version.value().stderr_text) : version.error().message());
    return report;
  }
  report.version = host::without_trailing_space(version.value().stdout_text);
  auto inspected = runtime.value().run({"image", "inspect", "--format", "{{.Id}}", options.image}, std::chrono::seconds(20));
  if (!inspected || inspected.value().exit_code != 0) {
    report.problem = fmt::format("the image {} is not present locally, and psych never pulls one: build it with "
                                 "scripts/build-image (or `{} pull {}` yourself, where a registry is reachable)",
                                 options.image, report.runtime, options.image);
    return report;
  }
  report.image_present = true;
  report.image_id = host::without_trailing_space(inspected.value().stdout_text);
  if (report.image_id.find(':') == std::string::npos) report.image_id = "sha256:" + report.image_id;
  report.available = true;
  return report;
}

result<std::unique_ptr<sandbox>> container_sandbox(const container_sandbox_options& options) {
  PSYCH_TRY(validate_limits(options.limit_ceiling));
  if (options.allowed_hosts)
    if (auto hosts = canonical_host_list(*options.allowed_hosts); !hosts)
      return fail_with(error_kind::invalid_argument, "allowed_hosts: " + hosts.error().detail);
  if (auto widening = widening_run_argument(options.extra_run_args))
    return fail_with(error_kind::sandbox_setup, *widening);
  if (::geteuid() != 0)
    return fail_with(error_kind::sandbox_setup,
                   "the container backend needs a root worker: it gives every execution a uid of its own "
                   "(--user from run_as_range), which a rootless runtime would map through the worker's "
                   "subordinate ids instead (not supported yet; docs/container-backend.md)");
  PSYCH_TRY(auto launcher, host::find_launcher(options.launcher_path));
  // Whether the runtime answers and the image is present is describe()'s to find out, below: the
  // probe that decides readiness asks the runtime anyway.
  auto found = host::find_container_runtime(options.runtime);
  if (!found) return fail_with(error_kind::sandbox_setup, "container: " + found.error().message());
  const host::container_runtime& runtime = found.value();
  auto identities = options.run_as_uid
                        ? host::uid_pool::shared(*options.run_as_uid, options.run_as_gid.value_or(*options.run_as_uid),
                                                 options.run_as_range.lock_dir)
                        : host::uid_pool::per_execution(options.run_as_range);
  if (!identities) return identities.error();
  // The directories are bind-mounted at their host paths, and the runtime cleans a destination of
  // "." and ".." and does not follow the host's symlinks in it: the launcher must be told the same
  // path the mount got, so the root is resolved here, once.
  auto resolved = options;
  std::error_code ec;
  resolved.temp_root = std::filesystem::canonical(options.temp_root, ec).string();
  if (ec) return fail_with(error_kind::sandbox_setup, fmt::format("temp_root {}: {}", options.temp_root, ec.message()));
  auto built = std::make_unique<container_backend>(resolved, runtime, launcher, identities.value(),
                                                   runtime.image_root_entries(options.image));
  if (!options.probe_at_open) return std::unique_ptr<sandbox>(std::move(built));
  // As local_sandbox(): what the probe observed decides; a backend that would fail every
  // execution is never handed back.
  const auto probed = built->describe();
  if (!probed.ready) {
    std::string problems;
    for (const auto& problem : probed.problems) problems.append(problems.empty() ? "" : "; ").append(problem);
    return fail_with(error_kind::sandbox_setup, "container: not ready: " + problems);
  }
  return std::unique_ptr<sandbox>(std::move(built));
}

}  // namespace psych
