// psych: run a model-written program in the local sandbox, or describe it.
#include <pthread.h>
#include <signal.h>

#include <charconv>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cli.hpp"
#include "config.hpp"
#include "report.hpp"
#include "psych/host/container_sandbox.hpp"
#include "psych/host/mcp.hpp"
#include "psych/host/remote_sandbox.hpp"
#include "psych/host/sandbox_service.hpp"
#include "psych/host/result_json.hpp"
#include "psych/host/sandbox.hpp"
#include "psych/terminal_text.hpp"

namespace {

using namespace psych;

enum exit_status : int { completed = 0, failed = 1, usage_error = 2, refused = 3 };

int fail_usage(const error& e) {
  // The message can quote a path, a config file or an MCP server's words.
  fmt::print(stderr, "psych: {}\n", terminal_text(e.message()));
  return usage_error;
}

result<std::string> read_program(const std::string& path) {
  std::ostringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
    if (std::cin.bad()) return failure(error_kind::unreadable_file, "standard input could not be read");
    return text.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return failure(error_kind::unreadable_file, fmt::format("{}: {}", path, std::strerror(errno)));
  text << in.rdbuf();
  if (in.bad()) return failure(error_kind::unreadable_file, fmt::format("{}: read error", path));
  return text.str();
}

/// ^C and SIGTERM cancel the execution (the tree is killed and the result
/// still printed) instead of killing psych and orphaning the sandbox. The
/// signals are blocked in every thread and taken by one waiter; SIGUSR1 is
/// how the waiter is told to finish.
class signal_canceller {
 public:
  signal_canceller() {
    sigemptyset(&signals_);
    for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGUSR1}) sigaddset(&signals_, signal);
    pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
    // An ignored signal is discarded before sigwait could see it, and a shell starts
    // background jobs with SIGINT ignored. nohup's ignored SIGHUP stays ignored.
    for (int signal : {SIGINT, SIGTERM, SIGUSR1}) std::signal(signal, SIG_DFL);
    waiter_ = std::thread([this] {
      for (;;) {
        int signal = 0;
        if (sigwait(&signals_, &signal) != 0 || signal == SIGUSR1) return;
        source_.request_stop();
      }
    });
  }
  ~signal_canceller() {
    pthread_kill(waiter_.native_handle(), SIGUSR1);
    waiter_.join();
  }
  signal_canceller(const signal_canceller&) = delete;
  signal_canceller& operator=(const signal_canceller&) = delete;
  std::stop_token token() const { return source_.get_token(); }

 private:
  sigset_t signals_{};
  std::stop_source source_;
  std::thread waiter_;
};

/// The deployment's settings: a config file if given, --allow-same-uid on top.
result<local_sandbox_options> sandbox_options(const std::string& config_path, bool allow_same_uid) {
  local_sandbox_options options;
  if (!config_path.empty()) {
    PSYCH_TRY(auto loaded, cli::load_config(config_path, options));
    options = std::move(loaded);
  }
  if (allow_same_uid) options.allow_same_uid = true;
  return options;
}

/// The container backend, from the deployment's settings and the command line's image and runtime.
container_sandbox_options container_options(const local_sandbox_options& local, const std::string& image,
                                            const std::string& runtime) {
  container_sandbox_options options;
  if (!image.empty()) options.image = image;
  if (!runtime.empty()) options.runtime = runtime;
  options.limit_ceiling = local.limit_ceiling;
  options.env_allowlist = local.env_allowlist;
  options.run_as_uid = local.run_as_uid;
  options.run_as_gid = local.run_as_gid;
  options.run_as_range = local.run_as_range;
  options.launcher_path = local.launcher_path;
  options.temp_root = local.temp_root;
  return options;
}

bool is_container(const std::optional<std::string>& backend) { return backend && *backend == "container"; }

/// The remote backend of --remote: the token from --token-command, run afresh for each request.
result<std::unique_ptr<sandbox>> remote_backend(const cli::remote_choice& remote, const local_sandbox_options& local) {
  if (local.backend || local.python_bin || local.launcher_path)
    return failure(error_kind::invalid_argument,
                   "--remote runs the program on the service: --backend, and a config's backend, python_bin and "
                   "launcher_path, are the service's to choose");
  if (remote.token_command.empty())
    return failure(error_kind::invalid_argument, "--remote needs --token-command (the only source of the token)");
  remote_sandbox_options options{.url = remote.url,
                                 .token = command_secret(remote.token_command),
                                 .allow_insecure_http = remote.allow_insecure_http};
  if (!remote.ca_file.empty()) options.ca_file = remote.ca_file;
  return remote_sandbox(std::move(options));
}

bool any_remote_option(const cli::remote_choice& remote) {
  return !remote.ca_file.empty() || !remote.token_command.empty() || remote.allow_insecure_http;
}

/// The pinned or strongest backend: a container when --backend container, a local one otherwise.
result<std::unique_ptr<sandbox>> chosen_sandbox(const local_sandbox_options& options, const std::string& image,
                                                const std::string& runtime, const cli::remote_choice& remote = {}) {
  if (!remote.url.empty()) {
    if (!image.empty() || !runtime.empty())
      return failure(error_kind::invalid_argument, "--image and --container-runtime are the service's to choose");
    return remote_backend(remote, options);
  }
  if (any_remote_option(remote))
    return failure(error_kind::invalid_argument, "--ca, --token-command and --allow-insecure-http need --remote");
  if (is_container(options.backend)) return container_sandbox(container_options(options, image, runtime));
  if (!image.empty() || !runtime.empty())
    return failure(error_kind::invalid_argument, "--image and --container-runtime need --backend container");
  return local_sandbox(options);
}

int run(const cli::run_command& command) {
  auto program = read_program(command.program_path);
  if (!program) return fail_usage(program.error());
  auto options = sandbox_options(command.config_path, command.allow_same_uid);
  if (!options) return fail_usage(options.error());
  if (!command.backend.empty()) options.value().backend = command.backend;
  options.value().pool.size = 0;  // one program: a pool would prepare sandboxes nobody claims (docs/pools.md)
  options.value().probe_at_open = false;  // the run is the probe: one sandbox started, not two
  auto sandbox = chosen_sandbox(options.value(), command.image, command.container_runtime, command.remote);
  if (!sandbox) return fail_usage(sandbox.error());

  const auto offer = sandbox.value()->offer();
  const auto decision = intersect_terms(offer, {.limits = offer.limit_ceiling, .allow_network = false},
                                        {.isolation = command.isolation, .limits = command.limits}, {});
  if (const auto* refusal = std::get_if<psych::refusal>(&decision)) {
    if (command.json)
      fmt::print("{}\n", host::refusal_to_json(*refusal));
    else
      fmt::print("{}", cli::refusal_report(*refusal));
    return refused;
  }
  std::unique_ptr<directory_blob_store> blobs;
  if (!command.blob_dir.empty()) {
    auto opened = open_directory_blob_store(command.blob_dir);
    if (!opened) return fail_usage(opened.error());
    blobs = std::move(opened).value();
  }
  std::unique_ptr<mcp_binding_source> mcp;
  if (!command.mcp_servers.empty()) {
    std::vector<std::unique_ptr<mcp_client>> clients;
    for (const auto& [name, server_command] : command.mcp_servers) {
      auto client = mcp_client::start({.name = name, .command = server_command});
      if (!client) return fail_usage(error{error_kind::invalid_argument, "--mcp " + name + ": " + client.error().message()});
      clients.push_back(std::move(client).value());
    }
    auto source = mcp_binding_source::create(std::move(clients));
    if (!source) return fail_usage(error{error_kind::invalid_argument, "--mcp: " + source.error().message()});
    mcp = std::move(source).value();
  }
  auto terms = std::get<execution_terms>(decision);
  terms.output = command.output;
  if (command.collect_artifacts) terms.artifacts.collection = artifact_collection::collect;
  signal_canceller canceller;
  const auto result = sandbox.value()->run(
      {.program = std::move(program).value(), .terms = terms,
       .filename = command.program_path == "-" ? "<stdin>" : command.program_path,
       .bindings = mcp ? mcp->offered_now() : std::vector<binding>{}, .invoker = mcp.get(), .blobs = blobs.get(),
       .tenant = command.tenant},
      canceller.token());
  if (command.json) fmt::print("{}\n", host::result_to_json(result));
  else fmt::print("{}", cli::result_report(result));
  return result.failure ? failed : completed;
}

int describe(const cli::describe_command& command) {
  auto configured = sandbox_options(command.config_path, command.allow_same_uid);
  if (!configured) return fail_usage(configured.error());
  auto& options = configured.value();
  if (!command.backend.empty()) options.backend = command.backend;
  std::vector<backend_info> backends;
  if (!command.remote.url.empty()) {
    auto sandbox = chosen_sandbox(options, command.image, command.container_runtime, command.remote);
    if (!sandbox) return fail_usage(sandbox.error());
    const description d = sandbox.value()->describe();
    backends.push_back({.name = "remote",
                        .isolation = d.isolation,
                        .available = d.ready,
                        .reason = d.ready ? fmt::format("the sandbox service at {} ({})", command.remote.url, d.backend)
                                          : fmt::format("the sandbox service at {} is not ready", command.remote.url)});
    if (command.json) fmt::print("{}\n", host::description_to_json(d, backends));
    else fmt::print("{}", cli::description_report(d, backends));
    return d.ready ? completed : failed;
  }
  if (any_remote_option(command.remote))
    return fail_usage(error{error_kind::invalid_argument, "--ca, --token-command and --allow-insecure-http need --remote"});
  if (is_container(options.backend)) {
    const auto found = detect_container_runtime(container_options(options, command.image, command.container_runtime));
    backends.push_back({.name = "container",
                        .isolation = isolation_level::isolated,
                        .available = found.available,
                        .reason = found.available ? fmt::format("{} {} runs image {} ({})", found.runtime, found.version,
                                                                found.image, found.image_id)
                                                  : found.problem});
  } else {
    backends = detect_local_backends(options);
  }
  auto sandbox = chosen_sandbox(options, command.image, command.container_runtime);
  description d;
  if (sandbox) d = sandbox.value()->describe();
  else d.problems.push_back(sandbox.error().message());
  if (command.json) {
    fmt::print("{}\n", host::description_to_json(d, backends));
    return d.ready ? completed : failed;
  }
  fmt::print("{}", cli::description_report(d, backends));
  return d.ready ? completed : failed;
}

/// "host:port", "[v6]:port".
result<std::pair<std::string, std::uint16_t>> listen_address(const std::string& text) {
  const auto colon = text.rfind(':');
  const auto bad = [&] {
    return failure(error_kind::invalid_argument, fmt::format("--listen expects HOST:PORT, got '{}'", text));
  };
  if (colon == std::string::npos || colon == 0) return bad();
  std::string host = text.substr(0, colon);
  if (host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  unsigned port = 0;
  const auto digits = std::string_view(text).substr(colon + 1);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (ec != std::errc{} || end != digits.data() + digits.size() || port > 65535) return bad();
  return std::pair{host, static_cast<std::uint16_t>(port)};
}

int serve(const cli::serve_command& command) {
  auto options = sandbox_options(command.config_path, command.allow_same_uid);
  if (!options) return fail_usage(options.error());
  if (!command.backend.empty()) options.value().backend = command.backend;
  if (options.value().backend == "linux-namespaces") options.value().isolation = isolation_level::isolated;
  auto listen = listen_address(command.listen);
  if (!listen) return fail_usage(listen.error());
  auto backend = chosen_sandbox(options.value(), command.image, command.container_runtime);
  if (!backend) return fail_usage(backend.error());
  sandbox_service_options service{.listen_host = listen.value().first,
                                  .port = listen.value().second,
                                  .allow_insecure_http = command.allow_insecure_http,
                                  .token_file = command.token_file,
                                  .max_concurrent = command.max_concurrent,
                                  .max_queued = command.max_queued,
                                  .drain_seconds = command.drain_seconds};
  if (!command.tls_cert.empty()) service.tls_cert_file = command.tls_cert;
  if (!command.tls_key.empty()) service.tls_key_file = command.tls_key;

  // Every thread the service starts inherits this mask, so the signals reach sigwait below only.
  sigset_t signals{};
  sigemptyset(&signals);
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&signals, signal);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  auto started = sandbox_service::start(std::move(backend).value(), std::move(service));
  if (!started) return fail_usage(started.error());
  auto& running = *started.value();
  fmt::print(stderr, "psych serve: listening on {}://{}:{}\n", command.tls_cert.empty() ? "http" : "https",
             listen.value().first, running.port());
  std::fflush(stderr);
  for (;;) {
    int signal = 0;
    if (sigwait(&signals, &signal) != 0) continue;
    if (signal == SIGHUP) {
      const auto reloaded = running.reload_tokens();
      fmt::print(stderr, "psych serve: SIGHUP: {}\n", reloaded ? "tokens re-read" : reloaded.error().message());
      std::fflush(stderr);
      continue;
    }
    fmt::print(stderr, "psych serve: {}: draining\n", signal == SIGTERM ? "SIGTERM" : "SIGINT");
    std::fflush(stderr);
    running.shutdown();
    fmt::print(stderr, "psych serve: stopped\n");
    return completed;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  auto command = cli::parse(args);
  if (!command) return fail_usage(command.error());
  return std::visit(
      [](const auto& c) -> int {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, cli::help_command>) {
          fmt::print("{}", c.text);
          return completed;
        } else if constexpr (std::is_same_v<T, cli::run_command>) {
          return run(c);
        } else if constexpr (std::is_same_v<T, cli::serve_command>) {
          return serve(c);
        } else {
          return describe(c);
        }
      },
      command.value());
}
