#include "cli.hpp"

#include <charconv>
#include <cmath>
#include <fmt/format.h>

namespace psych::cli {

const char* const usage =
    "usage: psych <command> [options]\n"
    "\n"
    "commands:\n"
    "  run       run one model-written program in the local sandbox and print its result\n"
    "  describe  show the local backends and what the sandbox can prove (a fixed probe, no program)\n"
    "\n"
    "psych <command> --help for the options of a command.\n";

const char* const run_usage =
    "usage: psych run [options] PROGRAM|-\n"
    "\n"
    "Runs PROGRAM (a Python file, or - for standard input) in a fresh sandbox. The program may use\n"
    "top-level await and top-level return; otherwise its final expression is its value.\n"
    "\n"
    "options:\n"
    "  --json                    print the result as one JSON object\n"
    "  --isolation LEVEL         minimum isolation: process (default) or isolated; the strongest local\n"
    "                            backend that reaches it runs the program\n"
    "  --backend NAME            pin one backend: linux-process or linux-namespaces\n"
    "  --wall-seconds S          wall-clock limit\n"
    "  --cpu-seconds S           CPU time limit\n"
    "  --memory-bytes N          memory (address space) limit; K, M, G suffixes allowed\n"
    "  --file-size-bytes N       largest file the program may write; K, M, G allowed\n"
    "  --process-count N         processes and threads, the interpreter included\n"
    "  --preview-bytes N         per stream, what the result's previews show (default 4000)\n"
    "  --max-output-bytes N      per stream, what is captured at all (default 8M); the rest is counted\n"
    "  --blob-dir DIR            preserve outputs and artifacts in a BlobStore at DIR (handles in the result)\n"
    "  --tenant NAME             whose blobs they are (default: default)\n"
    "  --preserve MODE           when_available (default) or required: fail when nothing can preserve\n"
    "  --collect-artifacts       return the files the program leaves in its workspace\n"
    "  --mcp NAME=COMMAND        start an MCP server over stdio (COMMAND split at spaces); the program\n"
    "                            calls its tools as NAME__tool (call_tool, aliases, TOOLS); repeatable\n"
    "  --allow-same-uid          when not root: let the child run as your own uid (identity: unavailable)\n"
    "  --config FILE             deployment settings as JSON: python_bin, default_limits, env_allowlist,\n"
    "                            allow_same_uid, launcher_path, run_as_uid, run_as_gid, temp_root, backend\n"
    "  --help                    this text\n"
    "\n"
    "Limits only narrow the backend's own (cpu 10 s, memory 512M, file 10M, 64 processes, wall 30 s).\n"
    "exit status: 0 completed; 1 failed or hit a limit; 2 usage or configuration error; 3 refused.\n";

const char* const describe_usage =
    "usage: psych describe [--json] [--allow-same-uid] [--config FILE]\n"
    "\n"
    "Lists the local backends (available or not, and why), then runs the fixed containment probe\n"
    "of the chosen one and prints each guarantee's grade, the mechanisms applied and any problem.\n"
    "exit status: 0 ready; 1 not ready; 2 usage or configuration error.\n";

namespace {

result<double> parse_seconds(std::string_view option, std::string_view text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size())
    return failure(error_kind::invalid_argument, fmt::format("{} expects a number of seconds, got '{}'", option, text));
  if (!std::isfinite(value) || value <= 0)
    return failure(error_kind::invalid_limit, fmt::format("{} must be positive and finite, got '{}'", option, text));
  return value;
}

result<std::uint64_t> parse_count(std::string_view option, std::string_view text, bool allow_suffix) {
  if (!text.empty() && text.front() == '-')
    return failure(error_kind::invalid_limit, fmt::format("{} must be positive, got '{}'", option, text));
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  std::string_view rest(end, static_cast<std::size_t>(text.data() + text.size() - end));
  unsigned shift = 0;
  if (allow_suffix && rest.size() == 1) {
    shift = rest == "K" || rest == "k" ? 10 : rest == "M" || rest == "m" ? 20 : rest == "G" || rest == "g" ? 30 : 0;
    if (shift) rest = {};
  }
  if (ec != std::errc{} || !rest.empty())
    return failure(error_kind::invalid_argument, fmt::format("{} expects a whole number, got '{}'", option, text));
  if (value == 0) return failure(error_kind::invalid_limit, fmt::format("{} must be positive, got '{}'", option, text));
  if (shift && value > (~std::uint64_t{0} >> shift))
    return failure(error_kind::invalid_argument, fmt::format("{} is too large: '{}'", option, text));
  return value << shift;
}

/// NAME=COMMAND: the command split at spaces (no shell, no quoting: a server's path and arguments).
result<std::pair<std::string, std::vector<std::string>>> parse_mcp(std::string_view value) {
  const auto equals = value.find('=');
  if (equals == std::string_view::npos || equals == 0)
    return failure(error_kind::invalid_argument, fmt::format("--mcp expects NAME=COMMAND, got '{}'", value));
  const auto name = value.substr(0, equals);
  if (name.find("__") != std::string_view::npos)
    return failure(error_kind::invalid_argument,
                   fmt::format("--mcp: the server name '{}' cannot hold \"__\" (it separates server and tool)", name));
  std::vector<std::string> command;
  for (auto rest = value.substr(equals + 1); !rest.empty();) {
    const auto space = rest.find(' ');
    if (space != 0) command.emplace_back(rest.substr(0, space));
    rest = space == std::string_view::npos ? std::string_view{} : rest.substr(space + 1);
  }
  if (command.empty()) return failure(error_kind::invalid_argument, fmt::format("--mcp {}: no command", name));
  return std::pair{std::string(name), std::move(command)};
}

result<command> parse_run(std::span<const std::string_view> args) {
  run_command run;
  bool have_program = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto arg = args[i];
    if (arg == "--help" || arg == "-h") return command{help_command{run_usage}};
    if (arg == "--json" || arg == "--allow-same-uid" || arg == "--collect-artifacts") {
      (arg == "--json" ? run.json : arg == "--allow-same-uid" ? run.allow_same_uid : run.collect_artifacts) = true;
      continue;
    }
    if (arg.starts_with("--")) {
      if (i + 1 >= args.size()) return failure(error_kind::invalid_argument, fmt::format("{} needs a value", arg));
      const auto value = args[++i];
      if (arg == "--config") {
        run.config_path = std::string(value);
      } else if (arg == "--backend") {
        run.backend = std::string(value);
      } else if (arg == "--isolation") {
        const auto level = parse_enum<isolation_level>(value);
        if (!level)
          return failure(error_kind::invalid_argument,
                         fmt::format("--isolation is process or isolated, got '{}'", value));
        run.isolation = *level;
      } else if (arg == "--wall-seconds") {
        PSYCH_TRY(auto parsed, parse_seconds(arg, value));
        run.limits.wall_seconds = parsed;
      } else if (arg == "--cpu-seconds") {
        PSYCH_TRY(auto parsed, parse_seconds(arg, value));
        run.limits.cpu_seconds = parsed;
      } else if (arg == "--memory-bytes") {
        PSYCH_TRY(auto parsed, parse_count(arg, value, true));
        run.limits.memory_bytes = parsed;
      } else if (arg == "--file-size-bytes") {
        PSYCH_TRY(auto parsed, parse_count(arg, value, true));
        run.limits.file_size_bytes = parsed;
      } else if (arg == "--process-count") {
        PSYCH_TRY(auto parsed, parse_count(arg, value, false));
        run.limits.process_count = parsed;
      } else if (arg == "--preview-bytes") {
        PSYCH_TRY(auto parsed, parse_count(arg, value, true));
        run.output.preview_bytes = parsed;
      } else if (arg == "--max-output-bytes") {
        PSYCH_TRY(auto parsed, parse_count(arg, value, true));
        run.output.max_bytes = parsed;
      } else if (arg == "--preserve") {
        const auto preserve = parse_enum<output_preservation>(value);
        if (!preserve)
          return failure(error_kind::invalid_argument,
                         fmt::format("--preserve is required or when_available, got '{}'", value));
        run.output.preserve = *preserve;
      } else if (arg == "--blob-dir") {
        run.blob_dir = std::string(value);
      } else if (arg == "--tenant") {
        run.tenant = std::string(value);
      } else if (arg == "--mcp") {
        PSYCH_TRY(auto server, parse_mcp(value));
        run.mcp_servers.push_back(std::move(server));
      } else {
        return failure(error_kind::invalid_argument, fmt::format("unknown option {} (see psych run --help)", arg));
      }
      continue;
    }
    if (have_program)
      return failure(error_kind::invalid_argument, fmt::format("one program per run; unexpected '{}'", arg));
    run.program_path = std::string(arg);
    have_program = true;
  }
  if (!have_program) return failure(error_kind::invalid_argument, "psych run needs a PROGRAM file, or - for stdin");
  return command{run};
}

result<command> parse_describe(std::span<const std::string_view> args) {
  describe_command describe;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto arg = args[i];
    if (arg == "--help" || arg == "-h") return command{help_command{describe_usage}};
    if (arg == "--config") {
      if (i + 1 >= args.size()) return failure(error_kind::invalid_argument, "--config needs a value");
      describe.config_path = std::string(args[++i]);
    } else if (arg == "--json") describe.json = true;
    else if (arg == "--allow-same-uid") describe.allow_same_uid = true;
    else return failure(error_kind::invalid_argument, fmt::format("unknown option {} (see psych describe --help)", arg));
  }
  return command{describe};
}

}  // namespace

result<command> parse(std::span<const std::string_view> args) {
  if (args.empty()) return failure(error_kind::invalid_argument, "no command given (see psych --help)");
  const auto name = args.front();
  const auto rest = args.subspan(1);
  if (name == "--help" || name == "-h" || name == "help") return command{help_command{usage}};
  if (name == "run") return parse_run(rest);
  if (name == "describe") return parse_describe(rest);
  return failure(error_kind::invalid_argument, fmt::format("unknown command '{}' (see psych --help)", name));
}

}  // namespace psych::cli
