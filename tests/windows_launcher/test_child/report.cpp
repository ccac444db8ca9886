#include "report.hpp"

#include <algorithm>
#include <string_view>

#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#include <tlhelp32.h>

#include "job_readback.hpp"
#include "platform/windows/text.hpp"

namespace psych::windows::test_child {

namespace {

std::int64_t parent_pid() {
  const HANDLE snapshot = ::CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
  if (snapshot == INVALID_HANDLE_VALUE) return -1;
  PROCESSENTRY32W entry{};
  entry.dwSize = sizeof entry;
  std::int64_t parent = -1;
  for (BOOL more = ::Process32FirstW(snapshot, &entry); more; more = ::Process32NextW(snapshot, &entry))
    if (entry.th32ProcessID == ::GetCurrentProcessId()) parent = entry.th32ParentProcessID;
  ::CloseHandle(snapshot);
  return parent;
}

/// Every variable name of the environment block, sorted ("=C:" style names included as they are).
std::vector<std::string> environment_keys() {
  std::vector<std::string> keys;
  wchar_t* block = ::GetEnvironmentStringsW();
  if (block == nullptr) return keys;
  for (const wchar_t* entry = block; *entry != L'\0'; entry += std::wcslen(entry) + 1) {
    const std::wstring_view text(entry);
    const auto equals = text.find(L'=', 1);  // a leading '=' belongs to the name
    keys.push_back(narrow(text.substr(0, equals)));
  }
  ::FreeEnvironmentStringsW(block);
  std::sort(keys.begin(), keys.end());
  return keys;
}

/// The volume and file index of a directory: the same two mean the same directory.
bool same_directory(const std::wstring& a, const std::wstring& b) {
  auto identity = [](const std::wstring& path, BY_HANDLE_FILE_INFORMATION& info) {
    const HANDLE dir = ::CreateFileW(path.c_str(), FILE_READ_ATTRIBUTES, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                                     nullptr, OPEN_EXISTING, FILE_FLAG_BACKUP_SEMANTICS, nullptr);
    if (dir == INVALID_HANDLE_VALUE) return false;
    const bool ok = ::GetFileInformationByHandle(dir, &info) != 0;
    ::CloseHandle(dir);
    return ok;
  };
  BY_HANDLE_FILE_INFORMATION x{}, y{};
  return identity(a, x) && identity(b, y) && x.dwVolumeSerialNumber == y.dwVolumeSerialNumber &&
         x.nFileIndexHigh == y.nFileIndexHigh && x.nFileIndexLow == y.nFileIndexLow;
}

std::int64_t entries_in(const std::wstring& directory) {
  WIN32_FIND_DATAW found{};
  const HANDLE search = ::FindFirstFileW((directory + L"\\*").c_str(), &found);
  if (search == INVALID_HANDLE_VALUE) return -1;
  std::int64_t count = 0;
  do {
    const std::wstring_view name(found.cFileName);
    if (name != L"." && name != L"..") ++count;
  } while (::FindNextFileW(search, &found));
  ::FindClose(search);
  return count;
}

canary_observation read_canary(const std::string& path) {
  const HANDLE file = ::CreateFileW(widen(path).c_str(), GENERIC_READ, FILE_SHARE_READ, nullptr, OPEN_EXISTING,
                                    FILE_ATTRIBUTE_NORMAL, nullptr);
  if (file == INVALID_HANDLE_VALUE) return {.readable = false, .error_number = ::GetLastError()};
  char byte = 0;
  DWORD got = 0;
  const bool read = ::ReadFile(file, &byte, 1, &got, nullptr) != 0;
  ::CloseHandle(file);
  return {.readable = read, .error_number = read ? 0 : static_cast<std::int64_t>(::GetLastError())};
}

/// Windows offers a process no network denial: the probe says what a connection to the host's
/// listener does.
network_probe probe_ipv4(std::int64_t port) {
  if (port == 0) return {probe_outcome::skipped, 0};
  const SOCKET s = ::WSASocketW(AF_INET, SOCK_STREAM, IPPROTO_TCP, nullptr, 0, WSA_FLAG_NO_HANDLE_INHERIT);
  if (s == INVALID_SOCKET) return {probe_outcome::denied, ::WSAGetLastError()};
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = ::htons(static_cast<u_short>(port));
  address.sin_addr.s_addr = ::htonl(INADDR_LOOPBACK);
  const bool connected = ::connect(s, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  const int error = connected ? 0 : ::WSAGetLastError();
  ::closesocket(s);
  if (connected) return {probe_outcome::connected, 0};
  if (error == WSAECONNREFUSED) return {probe_outcome::refused, error};
  if (error == WSAEACCES) return {probe_outcome::denied, error};
  return {probe_outcome::error, error};
}

rlimit_pair pair_of(std::int64_t value) { return {value, value}; }

}  // namespace

child_report observe_self(const invocation& how) {
  child_report report;
  report.pid = ::GetCurrentProcessId();
  report.ppid = parent_pid();
  report.environment_keys = environment_keys();
  wchar_t cwd[MAX_PATH * 2] = {};
  const DWORD length = ::GetCurrentDirectoryW(MAX_PATH * 2, cwd);
  report.cwd = narrow({cwd, length});
  const auto workspace = widen(how.workspace);
  report.cwd_is_workspace = same_directory(cwd, workspace);
  report.workspace_entries = entries_in(workspace);
  report.canary = read_canary(how.canary);
  report.network = {probe_ipv4(how.ipv4_port), {probe_outcome::skipped, 0}};
  report.python = "psych-windows-test-child";
  // The job this process runs in, read from inside; none: the report says so and holds no limit.
  if (auto job = read_job_back(nullptr)) {
    report.job = job.value().job;
    const auto& limits = job.value().per_process;
    report.rlimits.cpu_seconds = pair_of(limits.cpu_seconds);
    report.rlimits.address_space_bytes = pair_of(limits.address_space_bytes);
    report.rlimits.process_count = pair_of(limits.process_count);
  }
  BOOL in_job = FALSE;
  report.job.in_job = ::IsProcessInJob(::GetCurrentProcess(), nullptr, &in_job) && in_job;
  return report;
}

}  // namespace psych::windows::test_child
