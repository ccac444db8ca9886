// psych run and psych describe, and what they share with psych serve.
#include "commands.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <vector>

#include <fmt/format.h>

#include "config.hpp"
#include "files.hpp"
#include "interrupt.hpp"
#include "live_printer.hpp"
#include "mcp_servers.hpp"
#include "report.hpp"
#include "psych/host/container_sandbox.hpp"
#include "psych/host/mcp.hpp"
#include "psych/host/result_json.hpp"
#include "psych/terminal_text.hpp"

namespace psych::cli {
namespace {

/// The container backend, from the deployment's settings and the command line's image and runtime.
container_sandbox_options container_options(const local_sandbox_options& local, const std::string& image,
                                            const std::string& runtime) {
  container_sandbox_options options;
  if (!image.empty()) options.image = image;
  if (!runtime.empty()) options.runtime = runtime;
  options.limit_ceiling = local.limit_ceiling;
  options.env_allowlist = local.env_allowlist;
  options.allowed_hosts = local.allowed_hosts;
  options.run_as_uid = local.run_as_uid;
  options.run_as_gid = local.run_as_gid;
  options.run_as_range = local.run_as_range;
  options.launcher_path = local.launcher_path;
  options.temp_root = local.temp_root;
  options.probe_at_open = local.probe_at_open;
  return options;
}


bool is_container(const std::optional<std::string>& backend) { return backend && *backend == "container"; }

std::string local_backend_names(const local_sandbox_options& options) {
  std::string names;
  for (const auto& found : detect_local_backends(options)) names.append(names.empty() ? "" : ", ").append(found.name);
  return names;
}

bool is_unknown_backend(const local_sandbox_options& options) {
  const auto known = detect_local_backends(options);
  return std::none_of(known.begin(), known.end(), [&](const backend_info& b) { return b.name == *options.backend; });
}

bool any_remote_option(const remote_choice& remote) {
  return !remote.ca_file.empty() || !remote.token_command.empty() || remote.allow_insecure_http;
}

}  // namespace

std::optional<std::chrono::milliseconds> start_budget(std::optional<double> seconds) {
  if (!seconds) return std::nullopt;
  // At least 1 ms and at most a day, which no start-up needs.
  return std::chrono::milliseconds(std::max<std::int64_t>(1, static_cast<std::int64_t>(std::min(*seconds, 86400.0) * 1000)));
}

result<std::unique_ptr<mcp_binding_source>> start_mcp_servers(const std::vector<mcp_server_config>& servers,
                                                              std::optional<std::chrono::milliseconds> start_timeout) {
  std::vector<std::unique_ptr<mcp_client>> clients;
  for (auto server : servers) {
    if (start_timeout) server.start_timeout = *start_timeout;
    auto client = mcp_client::start(server);
    if (!client) return fail_with(error_kind::invalid_argument, "--mcp " + server.name + ": " + client.error().message());
    clients.push_back(std::move(client).value());
  }
  auto source = mcp_binding_source::create(std::move(clients));
  if (!source) return fail_with(error_kind::invalid_argument, "--mcp: " + source.error().message());
  return std::move(source).value();
}

started_upstream::~started_upstream() {
  all_.reset();
  while (!owners_.empty()) owners_.pop_back();
}

void started_upstream::seal() {
  if (parts_.size() == 1) {
    catalogue_ = parts_.front().catalogue;
    invoker_ = parts_.front().invoker;
  } else if (!parts_.empty()) {
    all_ = std::make_unique<binding_sources>(parts_);
    catalogue_ = all_.get();
    invoker_ = all_.get();
  }
}

result<std::unique_ptr<started_upstream>> start_upstream(const upstream_config& config,
                                                         std::optional<std::chrono::milliseconds> start_timeout,
                                                         const http_source_starter& start_http) {
  auto started = std::make_unique<started_upstream>();
  if (!config.stdio_servers.empty()) {
    PSYCH_TRY(auto stdio, start_mcp_servers(config.stdio_servers, start_timeout));
    started->add(std::move(stdio), "mcp");
  }
  if (config.reaches_http()) {
    if (!start_http)
      return fail_with(error_kind::invalid_argument,
                       "--mcp-http, --a2a and --http-tools are psych-remote's to reach (psych hands them over)");
    PSYCH_TRY(start_http(config, start_timeout, *started));
  }
  started->seal();
  return started;
}

int fail_usage(const error& e) {
  // The message can quote a path, a config file or an MCP server's words.
  fmt::print(stderr, "psych: {}\n", terminal_text(e.message()));
  return usage_error;
}

result<local_sandbox_options> sandbox_options(const std::string& config_path, bool allow_same_uid) {
  local_sandbox_options options;
  if (!config_path.empty()) {
    PSYCH_TRY(auto loaded, load_config(config_path, options));
    options = std::move(loaded);
  }
  if (allow_same_uid) options.allow_same_uid = true;
  return options;
}

result<std::unique_ptr<sandbox>> chosen_sandbox(const local_sandbox_options& options, const std::string& image,
                                                const std::string& runtime, const remote_choice& remote,
                                                const remote_opener& open_remote) {
  if (!remote.url.empty()) {
    if (!image.empty() || !runtime.empty())
      return fail_with(error_kind::invalid_argument, "--image and --container-runtime are the service's to choose");
    if (!open_remote)
      return fail_with(error_kind::invalid_argument, "--remote is psych-remote's to run (psych hands it over)");
    return open_remote(remote, options);
  }
  if (any_remote_option(remote))
    return fail_with(error_kind::invalid_argument, "--ca, --token-command and --allow-insecure-http need --remote");
  if (is_container(options.backend)) return container_sandbox(container_options(options, image, runtime));
  if (!image.empty() || !runtime.empty())
    return fail_with(error_kind::invalid_argument, "--image and --container-runtime need --backend container");
  auto local = local_sandbox(options);
  if (!local && options.backend && is_unknown_backend(options))
    return fail_with(error_kind::invalid_argument,
                     fmt::format("--backend: no backend is named '{}'; the backends are {}, container", *options.backend,
                                 local_backend_names(options)));
  return local;
}

int run(const run_command& given, const remote_opener& open_remote, const http_source_starter& start_http) {
  auto program = read_program(given.program_path);
  if (!program) return fail_usage(program.error());
  auto options = sandbox_options(given.config_path, given.allow_same_uid);
  if (!options) return fail_usage(options.error());
  if (!given.backend.empty()) options.value().backend = given.backend;
  options.value().pool.size = 0;  // one program: a pool would prepare sandboxes nobody claims (docs/pools.md)
  options.value().probe_at_open = false;  // the run is the probe: one sandbox started, not two
  auto sandbox = chosen_sandbox(options.value(), given.image, given.container_runtime, given.remote, open_remote);
  if (!sandbox) return fail_usage(sandbox.error());

  const auto offer = sandbox.value()->offer();
  // The command line is the deployment and the spec at once: the hosts it names are the profile's
  // too, and a config file's allowed_hosts (the backend's cap) narrows them.
  const auto decision = intersect_terms(
      offer, {.limits = offer.limit_ceiling, .allow_network = false},
      {.isolation = given.isolation,
       .limits = given.limits,
       .network = given.allowed_hosts.empty() ? network_access::none : network_access::allowlist,
       .allowed_hosts = given.allowed_hosts},
      {.allowed_hosts = given.allowed_hosts});
  if (const auto* refusal = std::get_if<psych::refusal>(&decision)) {
    if (given.json)
      fmt::print("{}\n", host::refusal_to_json(*refusal));
    else
      fmt::print("{}", refusal_report(*refusal));
    return refused;
  }
  std::unique_ptr<directory_blob_store> blobs;
  if (!given.blob_dir.empty()) {
    auto opened = open_directory_blob_store(given.blob_dir);
    if (!opened) return fail_usage(opened.error());
    blobs = std::move(opened).value();
  }
  auto upstream = upstream_of(given);
  if (!upstream) return fail_usage(upstream.error());
  auto sources = start_upstream(upstream.value(), start_budget(given.remote.connect_seconds), start_http);
  if (!sources) return fail_usage(sources.error());
  tool_catalogue* const catalogue = sources.value()->catalogue();
  auto terms = std::get<execution_terms>(decision);
  terms.output = given.output;
  if (given.collect_artifacts) terms.artifacts.collection = artifact_collection::collect;
  const bool streaming = given.stream || (!given.no_stream && !given.json && standard_output_is_terminal());
  live_printer printer(given.json);
  interrupt_canceller canceller;
  const auto result = sandbox.value()->run(
      {.program = std::move(program).value(), .terms = terms,
       .filename = given.program_path == "-" ? "<stdin>" : given.program_path,
       .bindings = catalogue ? catalogue->offered_now() : std::vector<binding>{},
       .invoker = sources.value()->invoker(), .blobs = blobs.get(),
       .tenant = given.tenant, .live_output = streaming ? &printer : nullptr},
      canceller.token());
  printer.finish();
  if (given.json) fmt::print("{}\n", host::result_to_json(result));
  else fmt::print("{}", result_report(result, streaming));
  return result.failure ? failed : completed;
}

int describe(const describe_command& given, const remote_opener& open_remote) {
  auto configured = sandbox_options(given.config_path, given.allow_same_uid);
  if (!configured) return fail_usage(configured.error());
  auto& options = configured.value();
  if (!given.backend.empty()) options.backend = given.backend;
  std::vector<backend_info> backends;
  if (!given.remote.url.empty()) {
    auto sandbox = chosen_sandbox(options, given.image, given.container_runtime, given.remote, open_remote);
    if (!sandbox) return fail_usage(sandbox.error());
    const description d = sandbox.value()->describe();
    backends.push_back({.name = "remote",
                        .isolation = d.isolation,
                        .available = d.ready,
                        .reason = d.ready ? fmt::format("the sandbox service at {} ({})", given.remote.url, d.backend)
                                          : fmt::format("the sandbox service at {} is not ready", given.remote.url)});
    if (given.json) fmt::print("{}\n", host::description_to_json(d, backends));
    else fmt::print("{}", description_report(d, backends));
    return d.ready ? completed : failed;
  }
  if (any_remote_option(given.remote))
    return fail_usage(error{error_kind::invalid_argument, "--ca, --token-command and --allow-insecure-http need --remote"});
  if (is_container(options.backend)) {
    const auto found = detect_container_runtime(container_options(options, given.image, given.container_runtime));
    backends.push_back({.name = "container",
                        .isolation = isolation_level::isolated,
                        .available = found.available,
                        .reason = found.available ? fmt::format("{} {} runs image {} ({})", found.runtime, found.version,
                                                                found.image, found.image_id)
                                                  : found.problem});
  } else {
    backends = detect_local_backends(options);
  }
  auto sandbox = chosen_sandbox(options, given.image, given.container_runtime);
  description d;
  if (sandbox) d = sandbox.value()->describe();
  else d.problems.push_back(sandbox.error().message());
  if (given.json) {
    fmt::print("{}\n", host::description_to_json(d, backends));
    return d.ready ? completed : failed;
  }
  fmt::print("{}", description_report(d, backends));
  return d.ready ? completed : failed;
}

}  // namespace psych::cli
