#pragma once
// How psych's own session (test_host_session.cpp) starts psych-launch-windows.exe on each test
// host: session_host_wine.cpp from Linux under Wine, session_host_windows.cpp as a Windows program.
#include <memory>
#include <string>

#include "execution/launcher_process.hpp"

namespace psych::testing::windows::os {

struct session_launch {
  /// Null: the session's own local_launcher of `launcher_path`, exactly as psych runs it.
  std::unique_ptr<host::launcher_starter> starter;
  std::string launcher_path;
  /// Where the session makes the execution's directories, as the host names it.
  std::string temp_root;
  /// The interpreter the launcher starts, as the launcher names it: the test child.
  std::string interpreter;
  /// Under Wine from Linux: the Windows directory as Wine names it; on Windows, the system's.
  std::string system_root;
};

session_launch launch_for_session();

}  // namespace psych::testing::windows::os
