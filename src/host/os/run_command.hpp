#pragma once
// A short command the host runs and waits for (a container runtime's `version`, `image exists`,
// `kill`): its output, bounded, and how it ended. Never a program's code: only the host's own
// fixed commands go through here.
#include <chrono>
#include <string>
#include <vector>

#include "psych/result.hpp"

namespace psych::host {

struct command_output {
  int exit_code = -1;    ///< -1: killed (the time limit) or not readable
  std::string stdout_text;  ///< at most 1 MiB each; the rest is dropped
  std::string stderr_text;
};

/// Runs argv (argv[0] a path) with `environment` ("NAME=value") and stdin on /dev/null; kills it
/// when it outlives `limit`. An error only when it could not be started.
result<command_output> run_command(const std::vector<std::string>& argv, const std::vector<std::string>& environment,
                                   std::chrono::milliseconds limit);

/// A command's answer without the newline (and spaces) it ends with.
std::string without_trailing_space(std::string text);

}  // namespace psych::host
