// psych's half of remote_commands.hpp: the commands that need the remote code run in psych-remote.
#include "remote_commands.hpp"

#include <unistd.h>
#ifdef __APPLE__
#include <mach-o/dyld.h>  // _NSGetExecutablePath: there is no /proc/self/exe
#endif

#include <cerrno>
#include <cstdint>
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
#ifdef __APPLE__
  char path[4096];
  std::uint32_t size = sizeof path;
  if (::_NSGetExecutablePath(path, &size) != 0)
    return fail_usage(error{error_kind::system_call_failed, "_NSGetExecutablePath: the path is too long"});
  const auto self = std::filesystem::weakly_canonical(path, ec);
  if (ec) return fail_usage(error{error_kind::system_call_failed, "realpath(executable): " + ec.message()});
#else
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return fail_usage(error{error_kind::system_call_failed, "readlink(/proc/self/exe): " + ec.message()});
#endif
  const auto helper = (self.parent_path() / PSYCH_REMOTE_BESIDE_BIN).lexically_normal().string();
  ::execv(helper.c_str(), argv);
  return fail_usage(error{error_kind::system_call_failed,
                          fmt::format("execv({}): {}; psych serve and --remote run in psych-remote, which psych "
                                      "installs there",
                                      helper, std::strerror(errno))});
}

}  // namespace psych::cli
