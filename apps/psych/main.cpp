// psych: run a model-written program in the local sandbox, or describe it. The same main() is
// psych's and psych-remote's; what differs is run_remote (remote_commands.hpp).
#include <string_view>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "cli.hpp"
#include "commands.hpp"
#include "remote_commands.hpp"

int main(int argc, char** argv) {
  using namespace psych::cli;
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  const auto parsed = parse(args);
  if (!parsed) return fail_usage(parsed.error());
  const command& chosen = parsed.value();
  if (needs_remote(chosen)) return run_remote(chosen, argv);
  if (const auto* help = std::get_if<help_command>(&chosen)) {
    fmt::print("{}", help->text);
    return completed;
  }
  if (const auto* run_it = std::get_if<run_command>(&chosen)) return run(*run_it, {});
  return describe(std::get<describe_command>(chosen), {});  // serve needs_remote
}
