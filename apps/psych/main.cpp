// psych: run a model-written program in the local sandbox, or describe it. The same main() is
// psych's and psych-remote's; what differs is run_remote (remote_commands.hpp).
#ifdef _WIN32
#include <fcntl.h>
#include <io.h>

#include "platform/windows/text.hpp"  // narrow
#endif

#include <cstdio>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "cli.hpp"
#include "psych/host/cgroup_leaf.hpp"
#include "commands.hpp"
#include "mcp_servers.hpp"
#include "remote_commands.hpp"

namespace {

int psych_main(int argc, char** argv) {
  using namespace psych::cli;
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  const auto parsed = parse(args);
  if (!parsed) return fail_usage(parsed.error());
  const command& chosen = parsed.value();
  if (const auto* help = std::get_if<help_command>(&chosen)) {
    fmt::print("{}", help->text);
    return completed;
  }
  // Before any launcher starts (and before serve's threads): where this process is alone in a
  // cgroup v2 cgroup it may manage, it settles in a leaf so that executions get cgroups beside it.
  (void)psych::host::settle_in_cgroup_leaf();
  if (needs_remote(chosen) || config_reaches_http(chosen)) return run_remote(chosen, argv);
  if (const auto* run_it = std::get_if<run_command>(&chosen)) return run(*run_it, {});
  if (const auto* mcp_it = std::get_if<mcp_command>(&chosen)) return mcp_stdio(*mcp_it);  // --listen needs_remote
  return describe(std::get<describe_command>(chosen), {});  // serve needs_remote
}

}  // namespace

#ifdef _WIN32
// The arguments as Windows has them (UTF-16), made UTF-8 as everything psych handles is; a
// narrow main() would get them in the ANSI code page, losing what it cannot spell. The standard
// streams carry bytes as on POSIX: a program read from stdin arrives as written, and --json is
// the same text everywhere (a console still shows Unicode: fmt writes to it with WriteConsoleW).
int wmain(int argc, wchar_t** wide_argv) {
  for (int stream : {0, 1, 2}) ::_setmode(stream, _O_BINARY);
  std::vector<std::string> utf8;
  utf8.reserve(static_cast<std::size_t>(argc));
  for (int i = 0; i < argc; ++i) utf8.push_back(psych::windows::narrow(wide_argv[i]));
  std::vector<char*> argv;
  for (auto& arg : utf8) argv.push_back(arg.data());
  argv.push_back(nullptr);
  return psych_main(argc, argv.data());
}
#else
int main(int argc, char** argv) { return psych_main(argc, argv); }
#endif
