# psych_host's and psych_remote's sources by where they build (docs/windows-launcher.md, "psych's
# host on Windows"): everywhere; POSIX only; and each system's half of a concern. Each list is in
# the rooms of src/host (docs/architecture.md, "The host's rooms"). Included by src/CMakeLists.txt
# and by the Windows project (launchers/windows/CMakeLists.txt, which cross-builds psych_host for
# its tests), so both build the same lists. Paths are absolute.
set(psych_host_sources
  host/os/random_hex.cpp
  host/os/host_environment.cpp
  host/os/run_command.cpp
  host/os/sha256.cpp
  host/store/file_run_log.cpp
  host/store/file_blob_store.cpp
  host/bindings/binding_gateway.cpp
  host/bindings/call_dispatcher.cpp
  host/bindings/blocking_invoker.cpp
  host/bindings/function_tools.cpp
  host/bindings/binding_sources.cpp
  host/bindings/output_reader.cpp
  host/bindings/read_tool_output.cpp
  host/execution/session.cpp
  host/execution/session_launch.cpp
  host/execution/session_conversation.cpp
  host/execution/session_clock.cpp
  host/execution/session_result.cpp
  host/execution/claim_point.cpp
  host/execution/launcher_process.cpp
  host/execution/loopback_attach.cpp
  host/execution/loopback_probe.cpp
  host/execution/attachments.cpp
  host/execution/finish_result.cpp
  host/execution/live_output_relay.cpp
  host/mcp/json_rpc_peer.cpp
  host/mcp/mcp_client.cpp
  host/mcp/mcp_binding_source.cpp
  host/backends/backend_support.cpp
  host/backends/local/local_sandbox.cpp
  host/backends/local/interpreter.cpp
  host/backends/platform_backends.cpp
  host/backends/local/prepared_pool.cpp
  host/backends/container/container_runtime.cpp
  host/runtime/runtime.cpp
  host/runtime/run_code.cpp
  host/runtime/model_payload.cpp
  # Last, so that adding them kept the unity batches above as they were (a batch's GCC warnings
  # depend on what it holds).
  host/store/memory_run_log.cpp
  host/mcp_server/offered_tools.cpp
  host/mcp_server/mcp_server_session.cpp
  host/mcp_server/mcp_stdio.cpp
  host/os/cgroup_leaf.cpp
  host/os/kernel_text.cpp)
# read_tool_output's pattern engine (bindings/line_pattern.hpp): RE2, or, for a target that has no
# RE2, none (every pattern refused by name).
set(psych_host_re2_sources host/bindings/line_pattern_re2.cpp)
set(psych_host_no_re2_sources host/bindings/line_pattern_none.cpp)
set(psych_host_posix_sources
  host/os/child_process_posix.cpp
  # POSIX by nature: who can reach a path (uids, modes, ACLs).
  host/os/path_access.cpp
  host/store/open_file_posix.cpp
  host/store/durable_file_posix.cpp
  host/store/store_directory_posix.cpp
  host/execution/execution_dirs_posix.cpp
  host/execution/egress_session.cpp
  host/execution/artifact_walk_posix.cpp
  host/mcp/json_rpc_streams_posix.cpp
  host/backends/uid_pool.cpp
  # POSIX by nature: descriptors passed over a Unix socket (SCM_RIGHTS).
  host/backends/container/container_sandbox.cpp
  host/backends/container/container_starter.cpp
  # Linux's switches for user namespaces (/proc/sys), which the local backend names when they refuse.
  host/os/userns_settings.cpp
  # POSIX by nature: the egress allowlist's proxy serves listening descriptors from a sandbox's network namespace.
  host/egress/address_class.cpp
  host/egress/client_hello.cpp
  host/egress/proxy_refusal.cpp
  host/egress/proxy_request.cpp
  host/egress/egress_meters.cpp
  host/egress/connection_clock.cpp
  host/egress/name_cache.cpp
  host/egress/upstream_dialer.cpp
  host/egress/proxy_connection.cpp
  host/egress/proxy_relay.cpp
  host/egress/proxy_tunnel.cpp
  host/egress/proxy_forward.cpp
  host/egress/egress_proxy.cpp)
set(psych_host_windows_sources
  host/os/child_process_windows.cpp
  host/os/os_handle_windows.cpp
  host/os/open_beneath_windows.cpp
  host/os/owner_only_security_windows.cpp
  host/store/open_file_windows.cpp
  host/store/durable_file_windows.cpp
  host/store/store_directory_windows.cpp
  host/execution/execution_dirs_windows.cpp
  host/execution/egress_session_windows.cpp
  host/execution/artifact_walk_windows.cpp
  host/mcp/json_rpc_streams_windows.cpp
  host/backends/uid_pool_windows.cpp
  # The container backend refused by name: it is POSIX by nature (above).
  host/backends/container/container_sandbox_windows.cpp)
# psych::remote: the remote backend and the sandbox service (HTTP on Beast, TLS on OpenSSL).
set(psych_remote_sources
  host/http/base64.cpp
  host/http/http_link.cpp
  host/http/bearer_tokens.cpp
  host/http/http_server.cpp
  host/backends/remote/remote_backend.cpp
  host/backends/remote/remote_execution.cpp
  host/backends/remote/remote_requests.cpp
  host/service/prometheus_text.cpp
  host/service/service_metrics.cpp
  host/service/access_log.cpp
  host/service/service_description.cpp
  host/service/admission.cpp
  host/service/service_routes.cpp
  host/service/execution_stream.cpp
  host/service/live_output_frames.cpp
  host/service/sandbox_service.cpp
  host/mcp_server/mcp_http_rules.cpp
  host/mcp_server/mcp_http_reply.cpp
  host/mcp_server/mcp_http_sessions.cpp
  host/mcp_server/mcp_http_requests.cpp
  host/mcp_server/mcp_http.cpp
  # The egress seam of the binding sources over HTTP (MCP Streamable HTTP, A2A, HTTP tools).
  host/http/egress.cpp
  host/http/sse_reader.cpp
  host/mcp/mcp_http_answer.cpp
  host/mcp/mcp_http_client.cpp
  host/http_tools/http_tool_request.cpp
  host/http_tools/http_tool_response.cpp
  host/http_tools/http_tool_file.cpp
  host/http_tools/http_tool_source.cpp
  host/a2a/peer_json.cpp
  host/a2a/agent_card.cpp
  host/a2a/task_wire.cpp
  host/a2a/a2a_peer.cpp
  host/a2a/a2a_binding_source.cpp)
foreach(list psych_host_sources psych_host_re2_sources psych_host_no_re2_sources psych_host_posix_sources psych_host_windows_sources psych_remote_sources)
  list(TRANSFORM ${list} PREPEND ${CMAKE_CURRENT_LIST_DIR}/)
endforeach()
# The platform layer's Windows half (UTF-16 text, command lines, environment blocks, inherited-handle
# lists), which the Windows launcher compiles too.
include(${CMAKE_CURRENT_LIST_DIR}/../platform/platform_sources.cmake)
list(APPEND psych_host_windows_sources ${psych_platform_windows_sources})

# What every file of psych_host is compiled with on Windows: the W calls, no min/max macros, no
# winsock 1, Windows 10's API. Private: none of them changes what psych's headers declare.
set(psych_host_windows_definitions UNICODE _UNICODE NOMINMAX WIN32_LEAN_AND_MEAN _WIN32_WINNT=0x0A00)
# What psych_host links on Windows besides its libraries: BCryptGenRandom and SHA-256 (CNG, in
# place of OpenSSL), NtCreateFile (the artifact walk), and Asio's sockets.
set(psych_host_windows_libraries bcrypt ntdll ws2_32 mswsock)
