# The command line's sources by where they build (docs/cli.md): everywhere, and each system's half
# of what differs (interrupt.hpp; psych's run_remote). Included by apps/CMakeLists.txt and by the
# Windows project (launchers/windows/CMakeLists.txt), which builds psych.exe. Paths are absolute.
set(psych_cli_sources psych/cli.cpp psych/byte_size.cpp psych/mcp_servers.cpp psych/config.cpp psych/report.cpp
    psych/commands.cpp psych/files.cpp psych/live_printer.cpp psych/mcp_command.cpp)
set(psych_cli_posix_sources psych/interrupt_posix.cpp)
# psych.exe: main.cpp and these, with psych_cli_sources. No psych-remote for Windows yet.
set(psych_windows_sources psych/main.cpp psych/interrupt_windows.cpp psych/remote_handoff_windows.cpp)
foreach(list psych_cli_sources psych_cli_posix_sources psych_windows_sources)
  list(TRANSFORM ${list} PREPEND ${CMAKE_CURRENT_LIST_DIR}/)
endforeach()
