# psych_host's and psych_remote's sources by where they build (docs/windows-launcher.md, "psych's
# host on Windows"): everywhere; POSIX only; and each system's half of the process layer
# (child_process.hpp, os_handle.hpp). Included by src/CMakeLists.txt and by the Windows project
# (launchers/windows/CMakeLists.txt, which cross-builds psych_host for its tests), so both build
# the same lists. Paths are absolute.
set(psych_host_sources
  host/interpreter.cpp
  host/random_hex.cpp
  host/host_environment.cpp
  host/run_command.cpp
  host/local_sandbox.cpp
  host/launcher_process.cpp
  host/binding_gateway.cpp
  host/run_code.cpp
  host/blocking_invoker.cpp
  host/function_tools.cpp
  host/binding_sources.cpp
  host/output_reader.cpp
  host/attachments.cpp
  host/model_payload.cpp
  host/read_tool_output.cpp
  host/runtime.cpp
  host/sha256.cpp
  host/platform_backends.cpp
  host/container_runtime.cpp
  host/prepared_pool.cpp
  host/session.cpp
  host/call_dispatcher.cpp
  host/loopback_attach.cpp
  host/loopback_probe.cpp
  host/file_run_log.cpp
  host/file_blob_store.cpp
  host/json_rpc_peer.cpp
  host/mcp_client.cpp
  host/mcp_binding_source.cpp)
# read_tool_output's pattern engine (host/line_pattern.hpp): RE2, or, for a target that has no RE2,
# none (every pattern refused by name).
set(psych_host_re2_sources host/line_pattern_re2.cpp)
set(psych_host_no_re2_sources host/line_pattern_none.cpp)
set(psych_host_posix_sources
  host/child_process_posix.cpp
  host/execution_dirs_posix.cpp
  host/artifact_walk_posix.cpp
  host/uid_pool.cpp
  host/durable_file_posix.cpp
  host/store_directory_posix.cpp
  host/json_rpc_streams_posix.cpp
  # POSIX by nature: who can reach a path (uids, modes, ACLs), and descriptors passed over a Unix
  # socket (SCM_RIGHTS).
  host/path_access.cpp
  host/container_sandbox.cpp
  host/container_starter.cpp)
set(psych_host_windows_sources
  host/child_process_windows.cpp
  host/execution_dirs_windows.cpp
  host/artifact_walk_windows.cpp
  host/uid_pool_windows.cpp
  host/os_handle_windows.cpp
  host/durable_file_windows.cpp
  host/store_directory_windows.cpp
  host/open_beneath_windows.cpp
  host/owner_only_security_windows.cpp
  host/json_rpc_streams_windows.cpp
  # The container backend refused by name: it is POSIX by nature (above).
  host/container_sandbox_windows.cpp
  # The Windows launcher's own UTF-16 conversions, error words, command lines, environment blocks
  # and inherited-handle lists.
  ../launchers/windows/text.cpp
  ../launchers/windows/command_line.cpp
  ../launchers/windows/handle_list.cpp
  ../launchers/windows/environment.cpp
  ../launchers/windows/failure.cpp)
# psych::remote: the remote backend and the sandbox service (HTTP on Beast, TLS on OpenSSL).
set(psych_remote_sources
  host/base64.cpp
  host/http_link.cpp
  host/remote_sandbox.cpp
  host/service_tokens.cpp
  host/prometheus_text.cpp
  host/service_metrics.cpp
  host/sandbox_service.cpp)
foreach(list psych_host_sources psych_host_re2_sources psych_host_no_re2_sources psych_host_posix_sources psych_host_windows_sources psych_remote_sources)
  list(TRANSFORM ${list} PREPEND ${CMAKE_CURRENT_LIST_DIR}/)
  set(absolute)
  foreach(source ${${list}})
    get_filename_component(source ${source} ABSOLUTE)
    list(APPEND absolute ${source})
  endforeach()
  set(${list} ${absolute})
endforeach()

# What every file of psych_host is compiled with on Windows: the W calls, no min/max macros, no
# winsock 1, Windows 10's API. Private: none of them changes what psych's headers declare.
set(psych_host_windows_definitions UNICODE _UNICODE NOMINMAX WIN32_LEAN_AND_MEAN _WIN32_WINNT=0x0A00)
# What psych_host links on Windows besides its libraries: BCryptGenRandom and SHA-256 (CNG, in
# place of OpenSSL), NtCreateFile (the artifact walk), and Asio's sockets.
set(psych_host_windows_libraries bcrypt ntdll ws2_32 mswsock)
