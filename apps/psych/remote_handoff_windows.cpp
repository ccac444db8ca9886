// psych's half of remote_commands.hpp on Windows, where psych-remote is not built: its remote
// backend and sandbox service are compiled for Windows but not linked, as their TLS needs OpenSSL
// for Windows (docs/windows-launcher.md, "psych's host on Windows"). Refused by name, never run
// in part.
#include "remote_commands.hpp"

#include "commands.hpp"

namespace psych::cli {

int run_remote(const command&, char**) {
  return fail_usage(error{error_kind::invalid_argument,
                          "psych serve and --remote run in psych-remote, which psych for Windows does not have "
                          "yet (docs/windows-launcher.md); run them from a Linux or macOS machine"});
}

}  // namespace psych::cli
