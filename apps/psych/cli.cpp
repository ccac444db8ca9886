#include "cli.hpp"

#include <charconv>
#include <cmath>
#include <concepts>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "byte_size.hpp"

namespace psych::cli {

namespace {

result<double> parse_seconds(std::string_view option, std::string_view text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  const bool whole = end == text.data() + text.size();
  // 1e999 overflows and 1e-999 underflows: numbers still, but no finite positive limit.
  if (ec == std::errc::result_out_of_range && whole)
    return fail_with(error_kind::invalid_limit, fmt::format("{} must be positive and finite, got '{}'", option, text));
  if (ec != std::errc{} || !whole)
    return fail_with(error_kind::invalid_argument, fmt::format("{} expects a number of seconds, got '{}'", option, text));
  if (!std::isfinite(value) || value <= 0)
    return fail_with(error_kind::invalid_limit, fmt::format("{} must be positive and finite, got '{}'", option, text));
  return value;
}

result<std::uint64_t> parse_count(std::string_view option, std::string_view text) {
  if (!text.empty() && text.front() == '-')
    return fail_with(error_kind::invalid_limit, fmt::format("{} must be positive, got '{}'", option, text));
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size())
    return fail_with(error_kind::invalid_argument, fmt::format("{} expects a whole number, got '{}'", option, text));
  if (value == 0) return fail_with(error_kind::invalid_limit, fmt::format("{} must be positive, got '{}'", option, text));
  return value;
}

/// NAME=COMMAND: the command split at spaces (no shell, no quoting: a server's path and arguments).
result<std::pair<std::string, std::vector<std::string>>> parse_mcp(std::string_view value) {
  const auto equals = value.find('=');
  if (equals == std::string_view::npos || equals == 0)
    return fail_with(error_kind::invalid_argument, fmt::format("--mcp expects NAME=COMMAND, got '{}'", value));
  const auto name = value.substr(0, equals);
  if (name.find("__") != std::string_view::npos)
    return fail_with(error_kind::invalid_argument,
                   fmt::format("--mcp: the server name '{}' cannot hold \"__\" (it separates server and tool)", name));
  std::vector<std::string> command;
  for (auto rest = value.substr(equals + 1); !rest.empty();) {
    const auto space = rest.find(' ');
    if (space != 0) command.emplace_back(rest.substr(0, space));
    rest = space == std::string_view::npos ? std::string_view{} : rest.substr(space + 1);
  }
  if (command.empty()) return fail_with(error_kind::invalid_argument, fmt::format("--mcp {}: no command", name));
  return std::pair{std::string(name), std::move(command)};
}

/// NAME=VALUE of a source reached over HTTP (--mcp-http, --a2a, --token-command-for).
result<std::pair<std::string, std::string>> parse_named(std::string_view option, std::string_view value_name,
                                                       std::string_view value) {
  const auto equals = value.find('=');
  if (equals == std::string_view::npos || equals == 0 || equals + 1 == value.size())
    return fail_with(error_kind::invalid_argument, fmt::format("{} expects NAME={}, got '{}'", option, value_name, value));
  const auto name = value.substr(0, equals);
  if (name.find("__") != std::string_view::npos)
    return fail_with(error_kind::invalid_argument,
                     fmt::format("{}: the name '{}' cannot hold \"__\" (it separates source and tool)", option, name));
  return std::pair{std::string(name), std::string(value.substr(equals + 1))};
}

template <named_enum E>
std::string spellings_of(std::string_view separator) {
  return fmt::format("{}", fmt::join(enum_names<E>::spellings, separator));
}

// ---- How an option's text becomes a field. Each returns a converter: (option, text) -> result<void>.

auto seconds_into(auto& field) {
  return [&field](std::string_view option, std::string_view text) -> result<void> {
    PSYCH_TRY(auto value, parse_seconds(option, text));
    field = value;
    return success();
  };
}

auto count_into(auto& field) {
  return [&field](std::string_view option, std::string_view text) -> result<void> {
    PSYCH_TRY(auto value, parse_count(option, text));
    field = value;
    return success();
  };
}

/// A size in bytes, with a unit or without (byte_size.hpp).
auto bytes_into(auto& field) {
  return [&field](std::string_view option, std::string_view text) -> result<void> {
    PSYCH_TRY(auto value, parse_byte_size(option, text));
    field = value;
    return success();
  };
}

template <named_enum E>
auto enum_into(E& field) {
  return [&field](std::string_view option, std::string_view text) -> result<void> {
    const auto value = parse_enum<E>(text);
    if (!value)
      return fail_with(error_kind::invalid_argument,
                     fmt::format("{} is one of {}, got '{}'", option, spellings_of<E>(", "), text));
    field = *value;
    return success();
  };
}

auto mcp_into(std::vector<std::pair<std::string, std::vector<std::string>>>& servers) {
  return [&servers](std::string_view, std::string_view text) -> result<void> {
    PSYCH_TRY(auto server, parse_mcp(text));
    servers.push_back(std::move(server));
    return success();
  };
}

auto named_into(std::vector<std::pair<std::string, std::string>>& entries, std::string_view value_name) {
  return [&entries, value_name](std::string_view option, std::string_view text) -> result<void> {
    PSYCH_TRY(auto entry, parse_named(option, value_name, text));
    entries.push_back(std::move(entry));
    return success();
  };
}

/// --allow-host PATTERN: one host pattern (host_pattern.hpp), checked as it is read; repeatable.
auto host_into(std::vector<std::string>& hosts) {
  return [&hosts](std::string_view option, std::string_view text) -> result<void> {
    auto pattern = parse_host_pattern(text);
    if (!pattern) return fail_with(error_kind::invalid_argument, fmt::format("{}: {}", option, pattern.error().detail));
    hosts.push_back(to_string(pattern.value()));
    return success();
  };
}

/// A refusal from one of the converters above, carried out of CLI11 (which reports by exception) to
/// parse(), which returns it as a value.
struct refused_value {
  error why;
};

/// An option whose text psych converts, so a bad value is psych's named error (invalid_limit or
/// invalid_argument, naming the option). It runs at each occurrence: a repeated option keeps the
/// last value, and a collecting converter (--mcp) sees every one.
template <class Convert>
  requires std::invocable<Convert, std::string_view, std::string_view>
CLI::Option* add_converted(CLI::App& app, const std::string& name, const std::string& value_name, Convert convert,
                           const std::string& help) {
  return app
      .add_option_function<std::string>(
          name,
          [name, convert](const std::string& text) {
            if (auto converted = convert(name, text); !converted) throw refused_value{converted.error()};
          },
          help)
      ->type_name(value_name)
      ->trigger_on_parse();
}

// ---- The options: one declaration each, from which parsing and the help text both come.

void add_deployment_options(CLI::App& app, bool& allow_same_uid, std::string& config_path) {
  app.add_flag("--allow-same-uid", allow_same_uid,
               "when not root: let the child run as your own uid (identity: unavailable)");
  app.add_option("--config", config_path,
                 "deployment settings as JSON: python_bin, limit_ceiling, env_allowlist, allow_same_uid, "
                 "launcher_path, run_as_uid, run_as_gid, temp_root, backend")
      ->type_name("FILE");
}

void add_backend_options(CLI::App& app, std::string& backend, std::string& image, std::string& runtime) {
  app.add_option("--backend", backend, "pin one backend: linux-process, linux-namespaces or container")
      ->type_name("NAME");
  app.add_option("--image", image,
                 "with --backend container: the local image, name[:tag] or name@sha256:… (never pulled; default "
                 "localhost/psych-python:bookworm, made by scripts/build-image)")
      ->type_name("REF");
  app.add_option("--container-runtime", runtime, "with --backend container: podman or docker (default: podman, then docker)")
      ->type_name("NAME");
}

void add_remote_options(CLI::App& app, remote_choice& remote) {
  app.add_option("--remote", remote.url,
                 "run on a sandbox service (psych serve) at URL, https://host:port; the program's tool calls "
                 "still run here")
      ->type_name("URL");
  app.add_option("--ca", remote.ca_file, "with --remote: the CA (or self-signed) certificate, PEM; default: the "
                                         "system's trust store")
      ->type_name("FILE");
  app.add_option("--token-command", remote.token_command,
                 "with --remote: a shell command printing the bearer token, run for each request")
      ->type_name("CMD");
  app.add_flag("--allow-insecure-http", remote.allow_insecure_http,
               "with --remote: allow http:// to a host that is not loopback (the network in between is trusted)");
  add_converted(app, "--connect-seconds", "S", seconds_into(remote.connect_seconds),
                "how long describing the service (every attempt) and starting each --mcp server may take "
                "(default 10 and 30)");
}

void add_limit_options(CLI::App& app, code_execution_limits& limits, output_policy& output) {
  add_converted(app, "--wall-seconds", "S", seconds_into(limits.wall_seconds), "wall-clock limit");
  add_converted(app, "--cpu-seconds", "S", seconds_into(limits.cpu_seconds), "CPU time limit");
  add_converted(app, "--memory-bytes", "N", bytes_into(limits.memory_bytes),
                "memory (address space) limit: 300M, 300MiB (binary), 300MB (decimal), 1.5G, or bytes");
  add_converted(app, "--file-size-bytes", "N", bytes_into(limits.file_size_bytes),
                "largest file the program may write; units as for --memory-bytes");
  add_converted(app, "--process-count", "N", count_into(limits.process_count),
                "processes and threads, the interpreter included");
  add_converted(app, "--preview-bytes", "N", bytes_into(output.preview_bytes),
                "per stream, what the result's previews show (default 4000)");
  add_converted(app, "--max-output-bytes", "N", bytes_into(output.max_bytes),
                "per stream, what is captured at all (default 8M); the rest is counted");
}

void add_allow_host(CLI::App& app, std::vector<std::string>& hosts) {
  add_converted(app, "--allow-host", "PATTERN", host_into(hosts),
                "network=allowlist: the program may reach this host through psych's egress proxy, and nothing "
                "else (api.example.com, *.example.com, example.com:8443; without a port, 80 and 443); "
                "isolation=isolated only; repeatable (docs/network.md)");
}

void add_upstream_options(CLI::App& app, std::vector<std::pair<std::string, std::vector<std::string>>>& servers,
                          std::string& config_path, http_sources_choice& http) {
  add_converted(app, "--mcp", "NAME=COMMAND", mcp_into(servers),
                "start an MCP server over stdio (COMMAND split at spaces; use --mcp-config for an argument "
                "with a space); the program calls its tools as NAME__tool (call_tool, aliases, TOOLS); repeatable");
  app.add_option("--mcp-config", config_path,
                 "MCP servers from a JSON file in the MCP clients' format: {\"mcpServers\": {NAME: {\"command\": "
                 "..., \"args\": [...], \"env\": {...}}}} (or {\"type\": \"http\", \"url\": ..., \"tokenCommand\": "
                 "...}); \"a2aPeers\" and \"httpTools\" beside it")
      ->type_name("FILE");
  add_converted(app, "--mcp-http", "NAME=URL", named_into(http.mcp_http, "URL"),
                "reach an MCP server over Streamable HTTP; the program calls its tools as NAME__tool; repeatable");
  add_converted(app, "--a2a", "NAME=URL", named_into(http.a2a, "URL"),
                "reach an A2A peer (its card at URL/.well-known/agent-card.json); each skill is a tool NAME__skill; "
                "repeatable");
  app.add_option_function<std::string>(
         "--http-tools", [&http](const std::string& path) { http.http_tools_files.push_back(path); },
         "HTTP endpoints declared as tools in a JSON file (docs/http-tools.md); repeatable")
      ->type_name("FILE")
      ->trigger_on_parse();
  add_converted(app, "--token-command-for", "NAME=COMMAND", named_into(http.token_commands, "COMMAND"),
                "the credential of the --mcp-http server or --a2a peer NAME: a shell command printing it, run for "
                "each request; repeatable");
}

void add_run_options(CLI::App& app, run_command& run) {
  app.add_flag("--json", run.json, "print the result as one JSON object");
  auto* stream = app.add_flag("--stream", run.stream,
               "print the program's output as it runs (the default on a terminal); with --json, as NDJSON "
               "`output` events before the result's line");
  app.add_flag("--no-stream", run.no_stream, "print the output only in the report, at the end")->excludes(stream);
  add_converted(app, "--isolation", spellings_of<isolation_level>("|"), enum_into(run.isolation),
                "minimum isolation (default process); the strongest local backend that reaches it runs the program");
  add_allow_host(app, run.allowed_hosts);
  add_backend_options(app, run.backend, run.image, run.container_runtime);
  add_limit_options(app, run.limits, run.output);
  app.add_option("--blob-dir", run.blob_dir,
                 "preserve outputs and artifacts in a BlobStore at DIR (handles in the result)")
      ->type_name("DIR");
  app.add_option("--tenant", run.tenant, "whose blobs they are (default: default)")->type_name("NAME");
  add_converted(app, "--preserve", spellings_of<output_preservation>("|"), enum_into(run.output.preserve),
                "when_available (default), or required: fail when nothing can preserve");
  app.add_flag("--collect-artifacts", run.collect_artifacts, "return the files the program leaves in its workspace");
  add_upstream_options(app, run.mcp_servers, run.mcp_config_path, run.http_sources);
  add_deployment_options(app, run.allow_same_uid, run.config_path);
  add_remote_options(app, run.remote);
  app.add_option("PROGRAM", run.program_path, "the Python file to run, or - for standard input")
      ->required()
      ->type_name("");
}

void add_describe_options(CLI::App& app, describe_command& describe) {
  app.add_flag("--json", describe.json, "print the backends and the description as one JSON object");
  add_backend_options(app, describe.backend, describe.image, describe.container_runtime);
  add_deployment_options(app, describe.allow_same_uid, describe.config_path);
  add_remote_options(app, describe.remote);
}

void add_serve_options(CLI::App& app, serve_command& serve) {
  app.add_option("--listen", serve.listen, "address and port to listen on (default 127.0.0.1:8443)")
      ->type_name("HOST:PORT");
  app.add_option("--tls-cert", serve.tls_cert, "certificate chain, PEM")->type_name("FILE");
  app.add_option("--tls-key", serve.tls_key, "private key, PEM")->type_name("FILE");
  app.add_option("--token-file", serve.token_file,
                 "accepted tokens, one per line (\"NAME TOKEN\" or \"TOKEN\"); re-read on SIGHUP")
      ->type_name("FILE")
      ->required();
  app.add_flag("--allow-insecure-http", serve.allow_insecure_http,
               "without --tls-cert: serve plaintext on an address that is not loopback");
  app.add_option("--trusted-proxy", serve.trusted_proxies,
                 "a load balancer's address: its X-Forwarded-For is logged as forwarded_for; repeatable")
      ->type_name("ADDRESS");
  add_converted(app, "--max-concurrent", "N", count_into(serve.max_concurrent),
                "executions running at once (default 4)");
  app.add_option("--max-queued", serve.max_queued,
                 "executions waiting for a slot (default 16); beyond it, 503 with Retry-After before anything runs")
      ->type_name("N");
  add_converted(app, "--drain-seconds", "S", seconds_into(serve.drain_seconds),
                "on SIGTERM, how long running executions may finish before they are cancelled (default 30)");
  add_backend_options(app, serve.backend, serve.image, serve.container_runtime);
  add_deployment_options(app, serve.allow_same_uid, serve.config_path);
}

void add_mcp_options(CLI::App& app, mcp_command& mcp) {
  add_converted(app, "--isolation", spellings_of<isolation_level>("|"), enum_into(mcp.isolation),
                "minimum isolation of every program (default process)");
  add_allow_host(app, mcp.allowed_hosts);
  add_backend_options(app, mcp.backend, mcp.image, mcp.container_runtime);
  add_limit_options(app, mcp.limits, mcp.output);
  add_upstream_options(app, mcp.mcp_servers, mcp.mcp_config_path, mcp.http_sources);
  add_converted(app, "--connect-seconds", "S", seconds_into(mcp.connect_seconds),
                "how long each --mcp server's start-up may take (default 30)");
  app.add_option("--blob-dir", mcp.blob_dir,
                 "preserve large outputs in a BlobStore at DIR (default: a private temporary directory, removed "
                 "at exit); read_tool_output reads them")
      ->type_name("DIR");
  app.add_option("--run-log-dir", mcp.run_log_dir,
                 "keep each session's run log as DIR/SESSION.runlog (default: in memory, for the session's life)")
      ->type_name("DIR");
  app.add_option("--tenant", mcp.tenant, "whose blobs they are (default: default)")->type_name("NAME");
  add_converted(app, "--max-concurrent", "N", count_into(mcp.max_concurrent),
                "run_code calls running at once in one session (default 4); one more is refused, never queued");
  app.add_option("--pool", mcp.pool, "sandboxes kept prepared for the next call (default 2; 0: none)")
      ->type_name("N");
  add_converted(app, "--max-calls", "N", count_into(mcp.max_calls), "tool calls one program may make (default 200)");
  add_converted(app, "--max-session-calls", "N", count_into(mcp.max_session_calls),
                "tool calls all the programs of one session may make together (default 1000)");
  app.add_option("--listen", mcp.listen,
                 "serve Streamable HTTP at HOST:PORT (path /mcp) instead of stdio; needs --token-file")
      ->type_name("HOST:PORT");
  app.add_option("--tls-cert", mcp.tls_cert, "with --listen: certificate chain, PEM")->type_name("FILE");
  app.add_option("--tls-key", mcp.tls_key, "with --listen: private key, PEM")->type_name("FILE");
  app.add_option("--token-file", mcp.token_file,
                 "with --listen: accepted bearer tokens, one per line (\"NAME TOKEN\" or \"TOKEN\"); re-read on SIGHUP")
      ->type_name("FILE");
  app.add_flag("--allow-insecure-http", mcp.allow_insecure_http,
               "with --listen and no --tls-cert: serve plaintext on an address that is not loopback");
  add_converted(app, "--max-sessions", "N", count_into(mcp.max_sessions),
                "with --listen: MCP sessions open at once (default 64); one more is refused");
  add_deployment_options(app, mcp.allow_same_uid, mcp.config_path);
}

// CLI11 shows a command's description both in the list of commands and atop its own help, so the
// description is one line and the longer prose goes in the footer.
std::string run_footer() {
  return fmt::format(
      "PROGRAM may use top-level await and top-level return; otherwise its final expression is its value.\n"
      "Limits only narrow the backend's own (cpu 10 s, memory 512M, file 10M, 64 processes, wall {} s).\n"
      "Program-made text in the readable report has its control characters spelled out (\\x1b); --json keeps the "
      "exact bytes.\n"
      "exit status: 0 completed; 1 failed or hit a limit; 2 usage or configuration error; 3 refused.",
      default_wall_seconds);
}
constexpr const char* serve_footer =
    "Runs executions sent by psych run --remote (or any remote_sandbox) on one local backend; the programs' tool\n"
    "calls go back to the client that sent them. SIGHUP re-reads the token file; SIGTERM drains and stops.\n"
    "One JSON access-log line per request on standard error, with no token and no program text.\n"
    "GET /metrics (no credential) serves the replica's counts in the Prometheus text format.\n"
    "exit status: 0 stopped cleanly; 2 usage or configuration error.";
constexpr const char* mcp_footer =
    "Put it in an MCP client's configuration: {\"mcpServers\": {\"psych\": {\"command\": \"psych\", \"args\": [\"mcp\",\n"
    "\"--mcp-config\", \"servers.json\"]}}}. The client's model gets run_code (and read_tool_output): one program\n"
    "per call, calling the --mcp servers' tools. One MCP session is one Run: its programs share the session's budget.\n"
    "exit status: 0 the client closed the session; 2 usage or configuration error.";
constexpr const char* describe_footer =
    "Lists the local backends (available or not, and why), then runs the fixed containment probe of the chosen\n"
    "one and prints each guarantee's grade, the mechanisms applied and any problem.\n"
    "exit status: 0 ready; 1 not ready; 2 usage or configuration error.";

}  // namespace

result<command> parse(std::span<const std::string_view> args) {
  run_command run;
  describe_command describe;
  serve_command serve;
  mcp_command mcp;
  CLI::App app("Runs a model-written Python program in the local sandbox and reports its result as data.",
               "psych");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.get_formatter()->column_width(30);
  app.require_subcommand(1);
  app.footer("psych COMMAND --help for the options of a command.");
  auto* run_app = app.add_subcommand("run", "run one model-written program in a fresh sandbox and print its result");
  run_app->footer(run_footer());
  add_run_options(*run_app, run);
  auto* describe_app = app.add_subcommand(
      "describe", "show the local backends and what the sandbox can prove (a fixed probe, no program)");
  describe_app->footer(describe_footer);
  add_describe_options(*describe_app, describe);
  auto* serve_app = app.add_subcommand("serve", "serve executions to remote clients over HTTPS on one local backend");
  serve_app->footer(serve_footer);
  add_serve_options(*serve_app, serve);
  auto* mcp_app = app.add_subcommand("mcp", "serve run_code to an MCP client (stdio, or Streamable HTTP with --listen)");
  mcp_app->footer(mcp_footer);
  add_mcp_options(*mcp_app, mcp);
  app.add_subcommand("help", "this text");

  // CLI11 takes the arguments last first.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return command{help_command{app.help()}};
  } catch (const CLI::ParseError& e) {
    const auto chosen = app.get_subcommands();
    if (chosen.empty()) {
      // CLI11 would only say that a subcommand is required; name what was given instead.
      std::string commands;
      for (const auto* c : app.get_subcommands([](const CLI::App*) { return true; }))
        commands.append(commands.empty() ? "" : ", ").append(c->get_name());
      if (args.empty())
        return fail_with(error_kind::invalid_argument, fmt::format("no command given: {} (see psych --help)", commands));
      return fail_with(error_kind::invalid_argument,
                     fmt::format("unknown command '{}': the commands are {} (see psych --help)", args.front(),
                                 commands));
    }
    return fail_with(error_kind::invalid_argument,
                   fmt::format("{} (see psych {} --help)", e.what(), chosen.front()->get_name()));
  } catch (const refused_value& refused) {
    return refused.why;
  }
  if (run_app->parsed()) return command{std::move(run)};
  if (describe_app->parsed()) return command{describe};
  if (serve_app->parsed()) return command{serve};
  if (mcp_app->parsed()) {
    if (mcp.listen.empty() && (!mcp.tls_cert.empty() || !mcp.tls_key.empty() || !mcp.token_file.empty() ||
                               mcp.allow_insecure_http))
      return fail_with(error_kind::invalid_argument,
                       "--tls-cert, --tls-key, --token-file and --allow-insecure-http need --listen");
    if (!mcp.listen.empty() && mcp.token_file.empty())
      return fail_with(error_kind::invalid_argument, "--listen needs --token-file (every HTTP request is authenticated)");
    return command{std::move(mcp)};
  }
  return command{help_command{app.get_formatter()->make_help(&app, "psych", CLI::AppFormatMode::Normal)}};
}

bool needs_remote(const command& parsed) {
  if (std::holds_alternative<serve_command>(parsed)) return true;
  if (const auto* as_mcp = std::get_if<mcp_command>(&parsed))
    return !as_mcp->listen.empty() || as_mcp->http_sources.any();
  if (const auto* as_run = std::get_if<run_command>(&parsed))
    return !as_run->remote.url.empty() || as_run->http_sources.any();
  if (const auto* as_describe = std::get_if<describe_command>(&parsed)) return !as_describe->remote.url.empty();
  return false;
}

}  // namespace psych::cli
