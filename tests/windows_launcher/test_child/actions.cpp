#include "actions.hpp"

#include <chrono>
#include <sstream>
#include <vector>

#include <winsock2.h>
#include <windows.h>

#include "platform/windows/text.hpp"

namespace psych::windows::test_child {

namespace {

using clock_type = std::chrono::steady_clock;

action_outcome failed(const std::string& action, DWORD error) {
  return {.action = action, .ok = false, .error_number = static_cast<std::int64_t>(error)};
}

action_outcome spin(const std::string& action, double seconds) {
  const auto until = clock_type::now() + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds));
  volatile std::uint64_t sink = 0;
  while (clock_type::now() < until)
    for (int i = 0; i < 100000; ++i) sink = sink + static_cast<std::uint64_t>(i);
  return {.action = action, .ok = true};
}

action_outcome allocate(const std::string& action, std::uint64_t bytes) {
  auto* memory = static_cast<char*>(::VirtualAlloc(nullptr, bytes, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE));
  if (memory == nullptr) return failed(action, ::GetLastError());
  for (std::uint64_t at = 0; at < bytes; at += 4096) memory[at] = 1;
  ::VirtualFree(memory, 0, MEM_RELEASE);
  return {.action = action, .ok = true, .count = static_cast<std::int64_t>(bytes)};
}

/// One copy of this executable, sleeping: `<self> --sleep SECONDS`. It inherits no handle, and
/// shares the child's (hidden) console.
DWORD start_sleeper(const std::wstring& self, double seconds, DWORD flags) {
  std::wstring line = L"\"" + self + L"\" --sleep " + std::to_wstring(seconds);
  STARTUPINFOW startup{};
  startup.cb = sizeof startup;
  PROCESS_INFORMATION started{};
  if (!::CreateProcessW(self.c_str(), line.data(), nullptr, nullptr, FALSE, flags, nullptr, nullptr,
                        &startup, &started))
    return ::GetLastError();
  ::CloseHandle(started.hThread);
  ::CloseHandle(started.hProcess);
  return ERROR_SUCCESS;
}

action_outcome spawn(const std::string& action, const std::wstring& self, std::int64_t count, double seconds) {
  action_outcome outcome{.action = action, .ok = true};
  for (std::int64_t i = 0; i < count; ++i) {
    if (const DWORD error = start_sleeper(self, seconds, 0); error != ERROR_SUCCESS) {
      outcome.ok = false;
      outcome.error_number = error;
      break;
    }
    ++outcome.count;
  }
  return outcome;
}

action_outcome write_file(const std::string& action, const std::string& workspace, const std::string& path,
                          const std::string& text) {
  const bool relative = path.size() < 2 || path[1] != ':';
  const auto full = widen(relative ? workspace + "\\" + path : path);
  const HANDLE file = ::CreateFileW(full.c_str(), GENERIC_WRITE, 0, nullptr, CREATE_ALWAYS, FILE_ATTRIBUTE_NORMAL, nullptr);
  if (file == INVALID_HANDLE_VALUE) return failed(action, ::GetLastError());
  DWORD written = 0;
  const bool ok = ::WriteFile(file, text.data(), static_cast<DWORD>(text.size()), &written, nullptr) != 0;
  const DWORD error = ok ? ERROR_SUCCESS : ::GetLastError();
  ::CloseHandle(file);
  if (!ok) return failed(action, error);
  return {.action = action, .ok = true, .count = written};
}

action_outcome print(const std::string& action, const std::string& text) {
  const std::string line = text + "\n";
  DWORD written = 0;
  const bool out = ::WriteFile(::GetStdHandle(STD_OUTPUT_HANDLE), line.data(), static_cast<DWORD>(line.size()), &written, nullptr);
  const bool err = ::WriteFile(::GetStdHandle(STD_ERROR_HANDLE), line.data(), static_cast<DWORD>(line.size()), &written, nullptr);
  if (!out || !err) return failed(action, ::GetLastError());
  return {.action = action, .ok = true};
}

bool is_socket(HANDLE handle) {
  int type = 0;
  int size = sizeof type;
  return ::getsockopt(reinterpret_cast<SOCKET>(handle), SOL_SOCKET, SO_TYPE, reinterpret_cast<char*>(&type), &size) == 0;
}

handle_census take_census() {
  handle_census census;
  for (std::uintptr_t value = 4; value < 65536; value += 4) {
    const auto handle = reinterpret_cast<HANDLE>(value);
    DWORD flags = 0;
    if (!::GetHandleInformation(handle, &flags)) continue;
    if (is_socket(handle)) {
      ++census.sockets;
      continue;
    }
    switch (::GetFileType(handle)) {
      case FILE_TYPE_PIPE: ++census.pipes; break;
      case FILE_TYPE_CHAR: ++census.characters; break;
      case FILE_TYPE_DISK: {
        wchar_t name[1024] = {};
        const DWORD length = ::GetFinalPathNameByHandleW(handle, name, 1024, FILE_NAME_NORMALIZED);
        census.disk_files.push_back(length > 0 && length < 1024 ? narrow({name, length}) : std::string("?"));
        break;
      }
      default: ++census.other; break;
    }
  }
  char byte = 0;
  DWORD got = 0;
  census.stdin_bytes = ::ReadFile(::GetStdHandle(STD_INPUT_HANDLE), &byte, 1, &got, nullptr) ? got : -1;
  return census;
}

/// The limit an action ran into, in the bootstrap's words: Python's MemoryError for a commit past
/// the job's memory, BlockingIOError (EAGAIN) for a process past its active process limit.
std::optional<protocol::program_error> limit_error(const std::string& verb, const action_outcome& outcome) {
  if (outcome.ok) return std::nullopt;
  if (verb == "allocate" && (outcome.error_number == ERROR_NOT_ENOUGH_MEMORY || outcome.error_number == ERROR_COMMITMENT_LIMIT))
    return protocol::program_error{.type = "MemoryError", .message = outcome.action, .limit_hint = "memory_bytes"};
  if (verb == "spawn" && outcome.error_number == ERROR_NOT_ENOUGH_QUOTA)
    return protocol::program_error{.type = "BlockingIOError", .message = outcome.action, .limit_hint = "process_count"};
  return std::nullopt;
}

}  // namespace

program_outcome run_program(const std::string& program, const std::wstring& self, const std::string& workspace) {
  program_outcome result;
  std::istringstream lines(program);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string verb;
    if (!(words >> verb)) continue;
    action_outcome outcome;
    if (verb == "spin") {
      double seconds = 0;
      words >> seconds;
      outcome = spin(line, seconds);
    } else if (verb == "allocate") {
      std::uint64_t bytes = 0;
      words >> bytes;
      outcome = allocate(line, bytes);
    } else if (verb == "spawn") {
      std::int64_t count = 0;
      double seconds = 0;
      words >> count >> seconds;
      outcome = spawn(line, self, count, seconds);
    } else if (verb == "breakaway") {
      const DWORD error = start_sleeper(self, 60, CREATE_BREAKAWAY_FROM_JOB);
      outcome = error == ERROR_SUCCESS ? action_outcome{.action = line, .ok = true, .count = 1} : failed(line, error);
    } else if (verb == "sleep") {
      double seconds = 0;
      words >> seconds;
      ::Sleep(static_cast<DWORD>(seconds * 1000));
      outcome = {.action = line, .ok = true};
    } else if (verb == "write") {
      std::string path, text;
      words >> path;
      std::getline(words >> std::ws, text);
      outcome = write_file(line, workspace, path, text);
    } else if (verb == "print") {
      std::string text;
      std::getline(words >> std::ws, text);
      outcome = print(line, text);
    } else if (verb == "handles") {
      result.seen.handles = take_census();
      outcome = {.action = line, .ok = true};
    } else {
      outcome = failed(line, ERROR_INVALID_FUNCTION);
    }
    result.seen.actions.push_back(outcome);
    if ((result.error = limit_error(verb, outcome))) break;
  }
  return result;
}

}  // namespace psych::windows::test_child
