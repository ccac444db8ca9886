// psych-remote's half of remote_commands.hpp: the commands run here, with the remote backend, the
// sandbox service and psych mcp's Streamable HTTP server linked in.
#include "remote_commands.hpp"

#include <pthread.h>
#include <signal.h>

#include <charconv>
#include <cstdio>
#include <functional>
#include <string_view>
#include <system_error>

#include <fmt/format.h>

#include "commands.hpp"
#include "http_sources.hpp"
#include "mcp_command.hpp"
#include "psych/host/mcp_http_server.hpp"
#include "psych/host/remote_sandbox.hpp"
#include "psych/host/sandbox_service.hpp"

namespace psych::cli {
namespace {

/// The remote backend of --remote: the token from --token-command, run afresh for each request.
result<std::unique_ptr<sandbox>> remote_backend(const remote_choice& remote, const local_sandbox_options& local) {
  if (local.backend || local.python_bin || local.launcher_path)
    return fail_with(error_kind::invalid_argument,
                   "--remote runs the program on the service: --backend, and a config's backend, python_bin and "
                   "launcher_path, are the service's to choose");
  if (remote.token_command.empty())
    return fail_with(error_kind::invalid_argument, "--remote needs --token-command (the only source of the token)");
  remote_sandbox_options options{.url = remote.url,
                                 .token = command_secret(remote.token_command),
                                 .allow_insecure_http = remote.allow_insecure_http};
  if (!remote.ca_file.empty()) options.ca_file = remote.ca_file;
  if (remote.connect_seconds) options.connect_timeout_seconds = *remote.connect_seconds;
  return remote_sandbox(std::move(options));
}

/// "host:port", "[v6]:port".
result<std::pair<std::string, std::uint16_t>> listen_address(const std::string& text) {
  const auto colon = text.rfind(':');
  const auto bad = [&] {
    return fail_with(error_kind::invalid_argument, fmt::format("--listen expects HOST:PORT, got '{}'", text));
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

/// Blocks SIGINT, SIGTERM and SIGHUP in this thread, before any other starts: every thread a
/// server starts inherits the mask, so the signals reach wait_for_signals() only.
sigset_t block_server_signals() {
  sigset_t signals{};
  sigemptyset(&signals);
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&signals, signal);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

/// A server's life after its start: SIGHUP re-reads its tokens, SIGTERM or SIGINT stops it. Each
/// is said on standard error, after `name` ("psych serve").
int wait_for_signals(const sigset_t& signals, std::string_view name, const std::function<result<void>()>& reload,
                     const std::function<void()>& stop, std::string_view stopping) {
  for (;;) {
    int signal = 0;
    if (sigwait(&signals, &signal) != 0) continue;
    if (signal == SIGHUP) {
      const auto reloaded = reload();
      fmt::print(stderr, "{}: SIGHUP: {}\n", name, reloaded ? "tokens re-read" : reloaded.error().message());
      std::fflush(stderr);
      continue;
    }
    fmt::print(stderr, "{}: {}: {}\n", name, signal == SIGTERM ? "SIGTERM" : "SIGINT", stopping);
    std::fflush(stderr);
    stop();
    fmt::print(stderr, "{}: stopped\n", name);
    return completed;
  }
}

/// The host of a URL: an IPv6 address in brackets.
std::string url_host(const std::string& host) {
  return host.find(':') == std::string::npos ? host : fmt::format("[{}]", host);
}

int serve(const serve_command& given) {
  auto options = sandbox_options(given.config_path, given.allow_same_uid);
  if (!options) return fail_usage(options.error());
  if (!given.backend.empty()) options.value().backend = given.backend;
  if (options.value().backend == "linux-namespaces") options.value().isolation = isolation_level::isolated;
  auto listen = listen_address(given.listen);
  if (!listen) return fail_usage(listen.error());
  auto backend = chosen_sandbox(options.value(), given.image, given.container_runtime);
  if (!backend) return fail_usage(backend.error());
  sandbox_service_options service{.listen_host = listen.value().first,
                                  .port = listen.value().second,
                                  .allow_insecure_http = given.allow_insecure_http,
                                  .trusted_proxies = given.trusted_proxies,
                                  .token_file = given.token_file,
                                  .max_concurrent = given.max_concurrent,
                                  .max_queued = given.max_queued,
                                  .drain_seconds = given.drain_seconds};
  if (!given.tls_cert.empty()) service.tls_cert_file = given.tls_cert;
  if (!given.tls_key.empty()) service.tls_key_file = given.tls_key;

  const auto signals = block_server_signals();
  auto started = sandbox_service::start(std::move(backend).value(), std::move(service));
  if (!started) return fail_usage(started.error());
  auto& running = *started.value();
  fmt::print(stderr, "psych serve: listening on {}://{}:{}\n", given.tls_cert.empty() ? "http" : "https",
             url_host(listen.value().first), running.port());
  std::fflush(stderr);
  return wait_for_signals(
      signals, "psych serve", [&] { return running.reload_tokens(); }, [&] { running.shutdown(); }, "draining");
}

/// psych mcp --listen: the deployment psych mcp over stdio would serve, over Streamable HTTP.
int mcp_listen(const mcp_command& given) {
  auto listen = listen_address(given.listen);
  if (!listen) return fail_usage(listen.error());
  // Before prepare_mcp: the upstream servers it starts must not take the signals either.
  const auto signals = block_server_signals();
  auto prepared = prepare_mcp(given, start_http_sources);
  if (!prepared) return fail_usage(prepared.error());
  mcp_http_options http{.listen_host = listen.value().first,
                        .port = listen.value().second,
                        .allow_insecure_http = given.allow_insecure_http,
                        .token_file = given.token_file,
                        .max_sessions = static_cast<std::size_t>(given.max_sessions)};
  if (!given.tls_cert.empty()) http.tls_cert_file = given.tls_cert;
  if (!given.tls_key.empty()) http.tls_key_file = given.tls_key;
  auto started = mcp_http_server::start(prepared.value()->options, std::move(http));
  if (!started) return fail_usage(started.error());
  auto& running = *started.value();
  fmt::print(stderr, "psych mcp: listening on {}://{}:{}/mcp\n", given.tls_cert.empty() ? "http" : "https",
             url_host(listen.value().first), running.port());
  std::fflush(stderr);
  return wait_for_signals(
      signals, "psych mcp", [&] { return running.reload_tokens(); }, [&] { running.shutdown(); },
      "cancelling every session's executions");
}

}  // namespace

int run_remote(const command& parsed, char**) {
  if (const auto* run_it = std::get_if<run_command>(&parsed)) return run(*run_it, remote_backend, start_http_sources);
  if (const auto* describe_it = std::get_if<describe_command>(&parsed)) return describe(*describe_it, remote_backend);
  if (const auto* mcp_it = std::get_if<mcp_command>(&parsed))
    return mcp_it->listen.empty() ? mcp_stdio(*mcp_it, start_http_sources) : mcp_listen(*mcp_it);
  return serve(std::get<serve_command>(parsed));
}

}  // namespace psych::cli
