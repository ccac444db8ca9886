// child_process.hpp on Windows. The child is created suspended with exactly its three standard
// handles (PROC_THREAD_ATTRIBUTE_HANDLE_LIST: nothing else of the host's crosses, inheritable or
// not), an environment block built from nothing but the caller's list, no console window, and a
// console process group of its own; it is put in a job of its own before it runs, so that it and
// everything it starts can be ended whole (TerminateJobObject), which is what a process group is
// for on POSIX. The job does not kill on close: a released child (the launcher, which the session
// reaps) outlives the job's handle.
#include "os/child_process.hpp"
#include "os/host_environment.hpp"

#include <windows.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "platform/windows/command_line.hpp"
#include "platform/windows/environment_block.hpp"  // the block, by Windows' rules
#include "platform/windows/handle_list.hpp"
#include "platform/windows/text.hpp"  // widen, narrow, error_text

namespace psych::host {
namespace {

/// What TerminateJobObject and TerminateProcess leave as the exit code of what they end: the
/// same as the Windows launcher's own (launchers/windows/job.cpp).
constexpr UINT terminated_by_host = 1;

spawn_error last_error(std::string call) { return {std::move(call), static_cast<int>(::GetLastError())}; }

/// The child's standard handles: inheritable copies of the caller's (the handle list takes only
/// inheritable handles; the caller's own stay as they are), NUL where the layout gives none.
struct standard_handles {
  std::array<unique_os_handle, 3> handles;
  std::optional<spawn_error> error;

  explicit standard_handles(const std::vector<os_handle>& layout) {
    const HANDLE self = ::GetCurrentProcess();
    for (std::size_t target = 0; target < handles.size(); ++target) {
      const os_handle source = target < layout.size() ? layout[target] : no_os_handle;
      HANDLE copy = nullptr;
      if (source != no_os_handle) {
        if (!::DuplicateHandle(self, source, self, &copy, 0, TRUE, DUPLICATE_SAME_ACCESS)) {
          error = last_error(fmt::format("DuplicateHandle(descriptor {})", target));
          return;
        }
      } else {
        SECURITY_ATTRIBUTES inherit{sizeof(SECURITY_ATTRIBUTES), nullptr, TRUE};
        copy = ::CreateFileW(L"NUL", target == 0 ? GENERIC_READ : GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE,
                             &inherit, OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr);
        if (copy == INVALID_HANDLE_VALUE) {
          error = last_error("CreateFileW(NUL)");
          return;
        }
      }
      handles[target] = unique_os_handle{copy};
    }
  }
};

bool has_directory(const std::string& program) { return program.find_first_of("\\/:") != std::string::npos; }

/// `name` on the host's PATH, as a shell finds it: each directory in order, the name as given and
/// with ".exe". Unlike CreateProcessW's own search, never the current directory or the host's.
std::optional<std::wstring> search_path(const std::string& name) {
  const auto path_variable = environment_value("PATH");
  if (!path_variable || path_variable->empty()) return std::nullopt;
  const std::wstring path = windows::widen(*path_variable);
  const std::wstring wide_name = windows::widen(name);
  std::vector<std::wstring> candidates{wide_name};
  if (name.find('.') == std::string::npos) candidates.push_back(wide_name + L".exe");
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t end = std::min(path.find(L';', start), path.size());
    const std::wstring directory = path.substr(start, end - start);
    start = end + 1;
    if (directory.empty()) continue;
    for (const auto& candidate : candidates) {
      std::wstring full = directory;
      if (full.back() != L'\\' && full.back() != L'/') full.push_back(L'\\');
      full += candidate;
      const DWORD attributes = ::GetFileAttributesW(full.c_str());
      if (attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_DIRECTORY) == 0) return full;
    }
  }
  return std::nullopt;
}

exit_status status_of(HANDLE process) {
  DWORD code = 0;
  if (!::GetExitCodeProcess(process, &code) || code == STILL_ACTIVE) return {};
  return {static_cast<int>(code)};
}

}  // namespace

std::string spawn_error::message() const {
  return fmt::format("{}: {}", call, windows::error_text(static_cast<DWORD>(error)));
}

std::string exit_status::text() const {
  // An NTSTATUS error (0xC...) is how a process that crashed ends: an access violation, a stack
  // overflow. -1 is 0xFFFFFFFF, which is no status Windows uses.
  if (code == -1) return "ended in a way that could not be read";
  if ((static_cast<std::uint32_t>(code) & 0xF0000000u) == 0xC0000000u)
    return fmt::format("ended with exception 0x{:08X}", static_cast<std::uint32_t>(code));
  return fmt::format("exited with status {}", static_cast<std::uint32_t>(code));
}

spawn_result child_process::spawn(const child_spec& spec) {
  if (spec.argv.empty() || spec.argv.front().empty()) return spawn_error{"CreateProcessW()", ERROR_FILE_NOT_FOUND};
  const std::string& program = spec.argv.front();
  if (program.find('"') != std::string::npos)  // argv[0] has no escapes on Windows
    return spawn_error{fmt::format("CreateProcessW({}): a program's path cannot hold a quote", program),
                       ERROR_INVALID_NAME};
  if (spec.descriptors.size() > 3)
    return spawn_error{"CreateProcessW: Windows gives a child only its standard handles (descriptors 0-2)",
                       ERROR_NOT_SUPPORTED};
  std::wstring executable = windows::widen(program);
  if (spec.search_path && !has_directory(program)) {
    auto found = search_path(program);
    if (!found) return spawn_error{fmt::format("CreateProcessW({}): not found on PATH", program), ERROR_FILE_NOT_FOUND};
    executable = std::move(*found);
  }

  std::map<std::string, std::string> variables;
  for (const auto& entry : spec.environment) {
    const auto equals = entry.find('=', 1);  // "=C:=C:\" style names start with '='; refused below
    if (equals == std::string::npos) variables[entry] = "";
    else variables[entry.substr(0, equals)] = entry.substr(equals + 1);
  }
  auto block = windows::build_environment_block(variables);
  if (!block) return spawn_error{"the environment block: " + block.error().detail, ERROR_BAD_ENVIRONMENT};

  standard_handles standard{spec.descriptors};
  if (standard.error) return *standard.error;
  std::vector<HANDLE> inherited;
  for (const auto& handle : standard.handles) inherited.push_back(handle.get());
  const windows::handle_list_attribute attribute{inherited};
  if (!attribute)
    return spawn_error{fmt::format("{}({})", attribute.failed_call(), attribute.failed_on()),
                       static_cast<int>(attribute.error())};

  unique_os_handle job{::CreateJobObjectW(nullptr, nullptr)};
  if (!job.valid()) return last_error("CreateJobObjectW");

  STARTUPINFOEXW startup{};
  startup.StartupInfo.cb = sizeof(startup);
  startup.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
  startup.StartupInfo.hStdInput = inherited[0];
  startup.StartupInfo.hStdOutput = inherited[1];
  startup.StartupInfo.hStdError = inherited[2];
  startup.lpAttributeList = attribute.get();
  std::vector<std::string> arguments(spec.argv.begin() + 1, spec.argv.end());
  std::wstring line = windows::command_line(windows::narrow(executable), arguments);
  PROCESS_INFORMATION started{};
  const DWORD flags = CREATE_SUSPENDED | CREATE_UNICODE_ENVIRONMENT | EXTENDED_STARTUPINFO_PRESENT | CREATE_NO_WINDOW |
                      CREATE_NEW_PROCESS_GROUP;
  if (!::CreateProcessW(executable.c_str(), line.data(), nullptr, nullptr, TRUE, flags, block.value().data(),
                        nullptr, &startup.StartupInfo, &started))
    return last_error(fmt::format("CreateProcessW({})", windows::narrow(executable)));
  unique_os_handle process{started.hProcess};
  const unique_os_handle thread{started.hThread};
  // In its job before its first instruction: nothing it starts can be outside.
  if (!::AssignProcessToJobObject(job.get(), process.get())) {
    const auto error = last_error("AssignProcessToJobObject");
    ::TerminateProcess(process.get(), terminated_by_host);
    ::WaitForSingleObject(process.get(), INFINITE);
    return error;
  }
  if (::ResumeThread(thread.get()) == static_cast<DWORD>(-1)) {
    const auto error = last_error("ResumeThread");
    ::TerminateJobObject(job.get(), terminated_by_host);
    ::WaitForSingleObject(process.get(), INFINITE);
    return error;
  }
  return child_process{static_cast<pid_t>(started.dwProcessId), process.release(), job.release()};
}

child_process::~child_process() { end(); }

child_process::child_process(child_process&& other) noexcept
    : pid_{std::exchange(other.pid_, -1)},
      pidfd_{std::exchange(other.pidfd_, no_os_handle)},
      job_{std::exchange(other.job_, no_os_handle)} {}

child_process& child_process::operator=(child_process&& other) noexcept {
  if (this != &other) {
    end();
    pid_ = std::exchange(other.pid_, -1);
    pidfd_ = std::exchange(other.pidfd_, no_os_handle);
    job_ = std::exchange(other.job_, no_os_handle);
  }
  return *this;
}

void child_process::end() noexcept {
  if (pidfd_ == no_os_handle) return;
  signal_group(ending::kill);
  (void)reap();
}

bool child_process::wait_exit(std::chrono::milliseconds limit) const {
  if (pidfd_ == no_os_handle) return true;
  const auto ms = std::clamp<std::chrono::milliseconds::rep>(limit.count(), 0, INFINITE - 1);
  return ::WaitForSingleObject(pidfd_, static_cast<DWORD>(ms)) == WAIT_OBJECT_0;
}

std::string child_process::status_text(std::chrono::milliseconds limit) const {
  if (pidfd_ == no_os_handle || !wait_exit(limit)) return "still running";
  return status_of(pidfd_).text();
}

void child_process::signal_group(ending /*how*/) const noexcept {
  if (job_ != no_os_handle) ::TerminateJobObject(job_, terminated_by_host);
  else if (pidfd_ != no_os_handle) ::TerminateProcess(pidfd_, terminated_by_host);
}

exit_status child_process::reap() {
  if (pidfd_ == no_os_handle) return {};
  const exit_status status = reap_pidfd(pid_, pidfd_);
  ::CloseHandle(pidfd_);
  pidfd_ = no_os_handle;
  if (job_ != no_os_handle) ::CloseHandle(std::exchange(job_, no_os_handle));
  pid_ = -1;
  return status;
}

child_process::released child_process::release() noexcept {
  // The job goes: it never killed on close, and the caller ends the child by its handle alone.
  if (job_ != no_os_handle) ::CloseHandle(std::exchange(job_, no_os_handle));
  return {std::exchange(pid_, -1), std::exchange(pidfd_, no_os_handle)};
}

exit_status child_process::reap_pidfd(pid_t /*pid*/, os_handle pidfd) {
  // Windows keeps a process's exit code while a handle to it is open: nothing to reap.
  if (::WaitForSingleObject(pidfd, INFINITE) != WAIT_OBJECT_0) return {};
  return status_of(pidfd);
}

void child_process::signal_held(pid_t /*pid*/, os_handle pidfd, ending /*how*/) noexcept {
  if (pidfd != no_os_handle) ::TerminateProcess(pidfd, terminated_by_host);
}

}  // namespace psych::host
