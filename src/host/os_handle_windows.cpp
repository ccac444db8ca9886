// os_handle.hpp on Windows: the output pipe as an overlapped named pipe.
#include "os_handle.hpp"

#include <windows.h>

#include <string>

#include <fmt/format.h>

#include "random_hex.hpp"
#include "launchers/windows/text.hpp"  // widen, error_text

namespace psych::host {

namespace {

result<os_handle_pair> pipe_failure(const char* call, const std::string& name) {
  return failure(error_kind::system_call_failed,
                 fmt::format("{}({}): {}", call, name, windows::error_text(::GetLastError())));
}

}  // namespace

result<os_handle_pair> output_pipe() {
  // Anonymous pipes cannot be read overlapped, and Asio's stream_handle needs that: a named pipe
  // with a name nobody can guess, the first and only instance, local clients only.
  const std::string name = "\\\\.\\pipe\\psych-output-" + random_hex(16);
  const std::wstring wide_name = windows::widen(name);
  constexpr DWORD buffer_bytes = 64 * 1024;
  unique_os_handle reader{::CreateNamedPipeW(
      wide_name.c_str(), PIPE_ACCESS_INBOUND | FILE_FLAG_OVERLAPPED | FILE_FLAG_FIRST_PIPE_INSTANCE,
      PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS, 1, buffer_bytes, buffer_bytes, 0,
      nullptr)};
  if (!reader.valid()) return pipe_failure("CreateNamedPipeW", name);
  // Not inheritable: a child that is to hold it is given it by an explicit handle list.
  unique_os_handle writer{::CreateFileW(wide_name.c_str(), GENERIC_WRITE, 0, nullptr, OPEN_EXISTING,
                                        FILE_ATTRIBUTE_NORMAL, nullptr)};
  if (!writer.valid()) return pipe_failure("CreateFileW", name);
  return os_handle_pair{std::move(reader), std::move(writer)};
}

}  // namespace psych::host
