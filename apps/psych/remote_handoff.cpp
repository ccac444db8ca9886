// psych's half of remote_commands.hpp: the commands that need the remote code run in psych-remote.
#include "remote_commands.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include <fmt/format.h>

#include "commands.hpp"

namespace psych::cli {

int run_remote(const command&, char** argv) {
  // Found beside this executable, as the launcher is (bin/ -> libexec/psych/, installed or in the
  // build tree), so a moved prefix still works and an installed psych never runs the build tree's.
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return fail_usage(error{error_kind::system_call_failed, "readlink(/proc/self/exe): " + ec.message()});
  const auto helper = (self.parent_path() / PSYCH_REMOTE_BESIDE_BIN).lexically_normal().string();
  ::execv(helper.c_str(), argv);
  return fail_usage(error{error_kind::system_call_failed,
                          fmt::format("execv({}): {}; psych serve and --remote run in psych-remote, which psych "
                                      "installs there",
                                      helper, std::strerror(errno))});
}

}  // namespace psych::cli
