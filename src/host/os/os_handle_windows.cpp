// os_handle.hpp on Windows: the output and input pipes as overlapped named pipes.
#include "os/os_handle.hpp"

#include <windows.h>

#include <string>
#include <utility>

#include <fmt/format.h>

#include "os/file_io_windows.hpp"
#include "os/random_hex.hpp"
#include "platform/windows/text.hpp"  // widen, error_text

namespace psych::host {

namespace {

using windows_io::call_failed;

/// A named pipe with a name nobody can guess, the first and only instance, local clients only:
/// anonymous pipes cannot be used overlapped. The host's end is the server's, overlapped, reading
/// (`inbound`) or writing; the child's end is opened plainly. Neither is inheritable: a child that is
/// to hold its end is given it by an explicit handle list.
result<std::pair<unique_os_handle, unique_os_handle>> overlapped_pipe(bool inbound) {
  const std::string name = "\\\\.\\pipe\\psych-" + std::string(inbound ? "output-" : "input-") + random_hex(16);
  const std::wstring wide_name = windows::widen(name);
  constexpr DWORD buffer_bytes = 64 * 1024;
  unique_os_handle hosts{::CreateNamedPipeW(
      wide_name.c_str(), (inbound ? PIPE_ACCESS_INBOUND : PIPE_ACCESS_OUTBOUND) | FILE_FLAG_OVERLAPPED |
                             FILE_FLAG_FIRST_PIPE_INSTANCE,
      PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS, 1, buffer_bytes, buffer_bytes, 0,
      nullptr)};
  if (!hosts.valid()) return call_failed("CreateNamedPipeW", name);
  unique_os_handle childs{::CreateFileW(wide_name.c_str(), inbound ? GENERIC_WRITE : GENERIC_READ, 0, nullptr,
                                        OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr)};
  if (!childs.valid()) return call_failed("CreateFileW", name);
  return std::pair{std::move(hosts), std::move(childs)};
}

}  // namespace

result<os_handle_pair> output_pipe() {
  PSYCH_TRY(auto ends, overlapped_pipe(/*inbound=*/true));
  return os_handle_pair{std::move(ends.first), std::move(ends.second)};
}

result<os_handle_pair> input_pipe() {
  PSYCH_TRY(auto ends, overlapped_pipe(/*inbound=*/false));
  return os_handle_pair{std::move(ends.second), std::move(ends.first)};
}

}  // namespace psych::host
