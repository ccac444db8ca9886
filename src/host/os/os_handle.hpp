#pragma once
// What the operating system hands the host for a pipe end or a process: a descriptor on POSIX, a
// HANDLE on Windows. The code that spawns processes and reads their output names this type, so
// it is written once for both; what only one kind of system has (Unix sockets, pidfds, signals)
// stays in code that builds only there.
#ifdef _WIN32
#include "platform/windows/unique_handle.hpp"
#else
#include "os/posix.hpp"
#endif

#include "psych/result.hpp"

namespace psych::host {

#ifdef _WIN32
using os_handle = HANDLE;
inline constexpr os_handle no_os_handle = nullptr;
/// Closed when its owner goes; INVALID_HANDLE_VALUE, which some calls fail with, owns nothing.
using unique_os_handle = windows::unique_handle;

/// Two ends of a pipe, each owned.
struct os_handle_pair {
  unique_os_handle first;   ///< the read end
  unique_os_handle second;  ///< the write end
};
#else
using os_handle = int;
inline constexpr os_handle no_os_handle = -1;
using unique_os_handle = unique_fd;
using os_handle_pair = fd_pair;
#endif

/// A pipe for a child's output: the read end for the host's event loop (Asio's stream
/// descriptor; on Windows an overlapped named pipe, since Asio cannot wait on an anonymous one),
/// the write end for the child to be given. Neither is inherited by any child it is not given to
/// (close-on-exec; on Windows not inheritable, and children get explicit handle lists).
result<os_handle_pair> output_pipe();

/// A pipe for a child's input: the read end for the child to be given, the write end for the host
/// (on Windows an overlapped named pipe, for json_rpc_streams.hpp's writer). Inherited by no child
/// it is not given to.
result<os_handle_pair> input_pipe();

#ifndef _WIN32
inline result<os_handle_pair> output_pipe() { return cloexec_pipe(); }
inline result<os_handle_pair> input_pipe() { return cloexec_pipe(); }
#endif

}  // namespace psych::host
