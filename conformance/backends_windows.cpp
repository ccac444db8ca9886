// The suite's backend on Windows: windows-process, psych-launch-windows.exe beside the suite's
// binary (found there by local_sandbox() itself) running the CPython $PSYCH_WINDOWS_PYTHON names, its executions' directories under a temp
// root of the suite's own in the account's temporary directory; and the census of what a case
// left, by the processes named as the interpreter and the launcher (docs/windows-launcher.md,
// "The conformance suite on Windows").
#include <windows.h>
#include <tlhelp32.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cwctype>
#include <filesystem>
#include <thread>

#include "backends.hpp"
#include "backends_platform.hpp"
#include "os/host_environment.hpp"
#include "platform/windows/text.hpp"
#include "os/random_hex.hpp"
#include "under_wine.hpp"
#include "platform/utf8_path.hpp"

namespace conformance {

namespace {

namespace fs = std::filesystem;

std::optional<std::string> windows_python() {
  auto python = psych::host::environment_value("PSYCH_WINDOWS_PYTHON");
  if (python && python->empty()) python.reset();
  return python;
}

std::wstring lowercase(std::wstring text) {
  std::transform(text.begin(), text.end(), text.begin(), [](wchar_t c) { return static_cast<wchar_t>(std::towlower(c)); });
  return text;
}

/// The executables whose processes a case of `backend` can start: the interpreter (and every
/// process a program starts with sys.executable) and the launcher.
std::vector<std::wstring> watched_images(const backend_under_test& backend) {
  std::vector<std::wstring> names{L"psych-launch-windows.exe"};
  if (backend.options.python_bin)
    names.push_back(lowercase(psych::platform::utf8_path(*backend.options.python_bin).filename().wstring()));
  return names;
}

/// The running processes with one of `images` as their executable's name, by pid.
std::vector<std::int64_t> running_processes_of(const std::vector<std::wstring>& images) {
  std::vector<std::int64_t> found;
  HANDLE snapshot = ::CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
  REQUIRE_MESSAGE(snapshot != INVALID_HANDLE_VALUE, "CreateToolhelp32Snapshot failed: " << ::GetLastError());
  PROCESSENTRY32W entry{};
  entry.dwSize = sizeof entry;
  for (BOOL more = ::Process32FirstW(snapshot, &entry); more; more = ::Process32NextW(snapshot, &entry)) {
    const auto image = lowercase(entry.szExeFile);
    if (std::find(images.begin(), images.end(), image) != images.end() && process_running(entry.th32ProcessID))
      found.push_back(entry.th32ProcessID);
  }
  ::CloseHandle(snapshot);
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

namespace {

/// Set once temp_root() has made the directory; after_the_run() removes it only then (a query such
/// as --list-test-cases runs no case, and a REQUIRE outside one crashes doctest).
std::atomic<bool> temp_root_made{false};

}  // namespace

const std::string& temp_root() {
  static const std::string root = [] {
    const auto path = fs::temp_directory_path() / ("psych-conformance-" + psych::host::random_hex(6));
    REQUIRE(fs::create_directory(path));  // removed by after_the_run()
    temp_root_made = true;
    return psych::windows::narrow(path.native());
  }();
  return root;
}

const std::vector<backend_under_test>& backends() {
  static const std::vector<backend_under_test> all = [] {
    psych::local_sandbox_options options;
    options.isolation = psych::isolation_level::process;
    options.backend = "windows-process";
    options.python_bin = windows_python();
    // No launcher_path: local_sandbox() finds psych-launch-windows.exe beside this binary, as it
    // finds it beside psych.exe.
    options.temp_root = temp_root();
    // Windows has no other account to give the child (identity UNAVAILABLE, docs/windows-launcher.md).
    options.allow_same_uid = true;
    return std::vector<backend_under_test>{{"windows-process", options, std::nullopt}};
  }();
  return all;
}

psych::result<std::unique_ptr<psych::sandbox>> make_sandbox(const backend_under_test& backend) {
  return psych::local_sandbox(backend.options);
}

namespace detail {

bool reported_unavailable(const backend_under_test& backend) {
  if (backend.options.python_bin) return false;
  if (psych::testing::under_wine()) {
    psych::testing::skip_case(psych::testing::allowed_in_ci::no_windows_cpython_under_wine,
                              "PSYCH_WINDOWS_PYTHON names no Windows CPython, and none can be installed here "
                              "(docs/windows-launcher.md): the CI matrix's Windows job runs the suite");
  } else {
    FAIL_CHECK("PSYCH_WINDOWS_PYTHON names no CPython: on Windows itself the suite must run "
               "(scripts/test-windows-launcher sets it)");
  }
  return true;
}

host_census census_before_case(const backend_under_test& backend) {
  return {.processes = running_processes_of(watched_images(backend))};
}

void check_nothing_left_since(const backend_under_test& backend, const host_census& before) {
  // The launcher reports only once its job is empty, but a process's end can reach the snapshot a
  // moment later: what is still running after two seconds is left.
  std::vector<std::int64_t> left;
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);;) {
    left.clear();
    for (const auto pid : running_processes_of(watched_images(backend)))
      if (!std::binary_search(before.processes.begin(), before.processes.end(), pid)) left.push_back(pid);
    if (left.empty() || std::chrono::steady_clock::now() > until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::string pids;
  for (const auto pid : left) pids += " " + std::to_string(pid);
  CHECK_MESSAGE(left.empty(), "processes of the interpreter or the launcher outlived the case:" << pids);
}

}  // namespace detail

void set_host_variable(const std::string& name, const std::optional<std::string>& value) {
  // The process's own block, which psych's host reads (host_environment.hpp), not the C runtime's copy.
  const auto wide_value = value ? psych::windows::widen(*value) : std::wstring();
  ::SetEnvironmentVariableW(psych::windows::widen(name).c_str(), value ? wide_value.c_str() : nullptr);
}

bool process_running(std::int64_t pid) {
  HANDLE process = ::OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, static_cast<DWORD>(pid));
  if (process == nullptr) return ::GetLastError() == ERROR_ACCESS_DENIED;  // another account's, still there
  DWORD code = 0;
  const bool running = ::GetExitCodeProcess(process, &code) && code == STILL_ACTIVE;
  ::CloseHandle(process);
  return running;
}

void after_the_run() {
  if (!temp_root_made) return;
  // Every execution emptied it (checked after each case); the root itself is ours to remove.
  std::error_code ec;
  fs::remove_all(psych::platform::utf8_path(temp_root()), ec);
}

}  // namespace conformance
