# The platform layer's sources: what psych's host and its launchers both need of a system, compiled
# into each (platform/README.md). Included by src/host_sources.cmake and by the Windows project
# (launchers/windows/CMakeLists.txt). Paths are absolute.
set(psych_platform_windows_sources
  ${CMAKE_CURRENT_LIST_DIR}/windows/text.cpp
  ${CMAKE_CURRENT_LIST_DIR}/windows/command_line.cpp
  ${CMAKE_CURRENT_LIST_DIR}/windows/handle_list.cpp
  ${CMAKE_CURRENT_LIST_DIR}/windows/environment_block.cpp)
