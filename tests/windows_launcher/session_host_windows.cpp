// psych's session as a Windows program (session_host.hpp): no starter of the test's own. The
// session's local_launcher starts psych-launch-windows.exe from beside this binary, exactly as
// psych runs it, and the execution's directories go where psych puts them by default on Windows:
// the account's temporary directory.
#include <cstdlib>

#include "host_os.hpp"
#include "psych/host/sandbox.hpp"
#include "session_host.hpp"

namespace psych::testing::windows::os {

session_launch launch_for_session() {
  const char* system_root = std::getenv("SystemRoot");
  return {.starter = nullptr,
          .launcher_path = launcher_path_of(test_child().parent_path() / "psych-launch-windows.exe"),
          .temp_root = psych::default_temp_root,
          .interpreter = launcher_path_of(test_child()),
          .system_root = system_root ? system_root : "C:\\Windows"};
}

}  // namespace psych::testing::windows::os
