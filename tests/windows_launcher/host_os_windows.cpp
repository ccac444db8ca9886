// host_os.hpp on Windows itself: the test binary is the host, psych-launch-windows.exe and the test
// child sit beside it, and the launcher is started with CreateProcessW. The same binary runs under
// Wine here (ctest case windows_launcher.windows_host), and natively in the CI matrix.
#include <windows.h>
#include <tlhelp32.h>
#include <winternl.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "host_os.hpp"
#include "platform/windows/environment_block.hpp"
#include "platform/windows/text.hpp"
#include "under_wine.hpp"

namespace psych::testing::windows::os {

using namespace std::chrono_literals;

namespace {

std::string win32_error_text(const char* call, DWORD error = ::GetLastError()) {
  return std::string(call) + " failed: " + psych::windows::error_text(error);
}

/// The directory of this test binary, where the Windows build puts the launcher and the child.
std::filesystem::path own_directory() {
  std::wstring path(32768, L'\0');
  const DWORD length = ::GetModuleFileNameW(nullptr, path.data(), static_cast<DWORD>(path.size()));
  path.resize(length);
  return std::filesystem::path(path).parent_path();
}

std::filesystem::path launcher_exe() { return own_directory() / "psych-launch-windows.exe"; }

/// The environment block the launcher gets: this binary's own, with `extra` set, built by the
/// launcher's own builder (sorted, one name per variable whatever its case).
std::wstring environment_block(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::map<std::string, std::string> variables;
  if (wchar_t* own = ::GetEnvironmentStringsW()) {
    for (const wchar_t* entry = own; *entry != L'\0'; entry += std::wcslen(entry) + 1) {
      const auto text = psych::windows::narrow(entry);
      // "=C:=C:\dir": cmd.exe's per-drive directories, which are no variables.
      if (const auto equals = text.find('=', 1); equals != std::string::npos)
        variables.emplace(text.substr(0, equals), text.substr(equals + 1));
    }
    ::FreeEnvironmentStringsW(own);
  }
  for (const auto& [name, value] : extra) variables[name] = value;
  auto block = psych::windows::build_environment_block(variables);
  if (!block) throw std::runtime_error("the launcher's environment: " + block.error().detail);
  return std::move(block).value();
}

/// The command line of another process, read from its PEB (Windows has no call that returns it
/// before 8.1, and Wine 8 answers ProcessCommandLineInformation with STATUS_INVALID_INFO_CLASS).
std::optional<std::wstring> command_line_of(HANDLE process) {
  PROCESS_BASIC_INFORMATION basic{};
  if (::NtQueryInformationProcess(process, ProcessBasicInformation, &basic, sizeof basic, nullptr) != 0 ||
      basic.PebBaseAddress == nullptr)
    return std::nullopt;
  PEB peb{};
  RTL_USER_PROCESS_PARAMETERS parameters{};
  if (!::ReadProcessMemory(process, basic.PebBaseAddress, &peb, sizeof peb, nullptr) ||
      !::ReadProcessMemory(process, peb.ProcessParameters, &parameters, sizeof parameters, nullptr))
    return std::nullopt;
  std::wstring text(parameters.CommandLine.Length / sizeof(wchar_t), L'\0');
  if (!::ReadProcessMemory(process, parameters.CommandLine.Buffer, text.data(), parameters.CommandLine.Length, nullptr))
    return std::nullopt;
  return text;
}

std::string drain(HANDLE& pipe) {
  std::string text;
  // The launcher closed its copies and the tree is gone: end of file comes; a bound keeps a
  // leftover writer from hanging the test.
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (pipe != nullptr && std::chrono::steady_clock::now() < until) {
    DWORD available = 0;
    if (!::PeekNamedPipe(pipe, nullptr, 0, nullptr, &available, nullptr)) break;  // end of file
    if (available == 0) {
      std::this_thread::sleep_for(10ms);
      continue;
    }
    char buffer[4096];
    DWORD read = 0;
    if (!::ReadFile(pipe, buffer, std::min<DWORD>(available, sizeof buffer), &read, nullptr) || read == 0) break;
    text.append(buffer, read);
  }
  if (pipe != nullptr) ::CloseHandle(pipe);
  pipe = nullptr;
  return text;
}

}  // namespace

std::optional<std::string> why_launcher_cannot_run() {
  for (const auto& exe : {launcher_exe(), test_child()})
    if (!std::filesystem::exists(exe))
      return exe.string() + " is missing: the Windows build puts it beside this test binary";
  return std::nullopt;
}

bool under_wine() { return psych::testing::under_wine(); }

std::optional<double> setup_seconds() { return std::nullopt; }

std::string launcher_path_of(const std::filesystem::path& path) { return psych::windows::narrow(path.lexically_normal().native()); }

std::filesystem::path test_child() { return own_directory() / "psych-windows-test-child.exe"; }

// ---- the launcher ------------------------------------------------------------------------

struct launcher_process::state {
  HANDLE process = nullptr;
  HANDLE stdout_read = nullptr, stderr_read = nullptr;
  bool killed = false;
};

launcher_process::launcher_process(const std::vector<std::pair<std::string, std::string>>& extra_environment,
                                   const std::filesystem::path& stdin_file)
    : state_(std::make_unique<state>()) {
  SECURITY_ATTRIBUTES inheritable{.nLength = sizeof(SECURITY_ATTRIBUTES), .lpSecurityDescriptor = nullptr,
                                  .bInheritHandle = TRUE};
  HANDLE stdout_write = nullptr, stderr_write = nullptr;
  // 1 MiB each: the host drains them once the launcher has exited.
  if (!::CreatePipe(&state_->stdout_read, &stdout_write, &inheritable, 1 << 20) ||
      !::CreatePipe(&state_->stderr_read, &stderr_write, &inheritable, 1 << 20))
    throw std::runtime_error(win32_error_text("CreatePipe"));
  ::SetHandleInformation(state_->stdout_read, HANDLE_FLAG_INHERIT, 0);
  ::SetHandleInformation(state_->stderr_read, HANDLE_FLAG_INHERIT, 0);
  // The decoy is inheritable on purpose: only the launcher's handle list keeps it from the child.
  HANDLE input = ::CreateFileW(stdin_file.c_str(), GENERIC_READ, FILE_SHARE_READ, &inheritable, OPEN_EXISTING,
                               FILE_ATTRIBUTE_NORMAL, nullptr);
  if (input == INVALID_HANDLE_VALUE) throw std::runtime_error(win32_error_text("CreateFileW decoy"));

  STARTUPINFOW startup{};
  startup.cb = sizeof startup;
  startup.dwFlags = STARTF_USESTDHANDLES;
  startup.hStdInput = input;
  startup.hStdOutput = stdout_write;
  startup.hStdError = stderr_write;
  const auto exe = launcher_exe().native();
  std::wstring command_line = L"\"" + exe + L"\"";
  auto environment = environment_block(extra_environment);
  PROCESS_INFORMATION created{};
  const BOOL ok = ::CreateProcessW(exe.c_str(), command_line.data(), nullptr, nullptr, TRUE,
                                   CREATE_UNICODE_ENVIRONMENT | CREATE_NO_WINDOW, environment.data(), nullptr,
                                   &startup, &created);
  const DWORD error = ::GetLastError();
  ::CloseHandle(input);
  ::CloseHandle(stdout_write);
  ::CloseHandle(stderr_write);
  if (!ok) throw std::runtime_error(win32_error_text("CreateProcessW", error));
  ::CloseHandle(created.hThread);
  state_->process = created.hProcess;
}

launcher_process::~launcher_process() {
  if (state_->process != nullptr) {
    ::TerminateProcess(state_->process, 1);
    ::WaitForSingleObject(state_->process, 5000);
    ::CloseHandle(state_->process);
  }
  for (HANDLE pipe : {state_->stdout_read, state_->stderr_read})
    if (pipe != nullptr) ::CloseHandle(pipe);
}

int launcher_process::wait(std::chrono::milliseconds timeout) {
  if (state_->process == nullptr) return -1;
  int status = -1;
  if (::WaitForSingleObject(state_->process, static_cast<DWORD>(timeout.count())) == WAIT_OBJECT_0) {
    DWORD code = 0;
    if (!state_->killed && ::GetExitCodeProcess(state_->process, &code)) status = static_cast<int>(code);
  } else {
    ::TerminateProcess(state_->process, 1);
    ::WaitForSingleObject(state_->process, 5000);
  }
  ::CloseHandle(state_->process);
  state_->process = nullptr;
  return status;
}

void launcher_process::kill() {
  if (state_->process != nullptr && ::TerminateProcess(state_->process, 1)) state_->killed = true;
}

std::string launcher_process::drain_stdout() { return drain(state_->stdout_read); }
std::string launcher_process::drain_stderr() { return drain(state_->stderr_read); }

std::vector<process_id> processes_with(std::string_view marker) {
  std::vector<process_id> found;
  HANDLE snapshot = ::CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
  if (snapshot == INVALID_HANDLE_VALUE) throw std::runtime_error(win32_error_text("CreateToolhelp32Snapshot"));
  const auto wanted = psych::windows::widen(marker);
  PROCESSENTRY32W entry{};
  entry.dwSize = sizeof entry;
  for (BOOL more = ::Process32FirstW(snapshot, &entry); more; more = ::Process32NextW(snapshot, &entry)) {
    if (entry.th32ProcessID == ::GetCurrentProcessId()) continue;
    HANDLE process = ::OpenProcess(PROCESS_QUERY_INFORMATION | PROCESS_VM_READ, FALSE, entry.th32ProcessID);
    if (process == nullptr) continue;  // another account's, or gone
    DWORD code = 0;
    const bool running = ::GetExitCodeProcess(process, &code) && code == STILL_ACTIVE;
    const auto line = running ? command_line_of(process) : std::nullopt;
    ::CloseHandle(process);
    if (line && line->find(wanted) != std::wstring::npos) found.push_back(entry.th32ProcessID);
  }
  ::CloseHandle(snapshot);
  return found;
}

void kill_process(process_id id) {
  if (HANDLE process = ::OpenProcess(PROCESS_TERMINATE, FALSE, static_cast<DWORD>(id))) {
    ::TerminateProcess(process, 1);
    ::CloseHandle(process);
  }
}

}  // namespace psych::testing::windows::os
