// psych's host on Windows, its process layer (src/host/os/child_process_windows.cpp,
// os_handle_windows.cpp, random_hex.cpp): the children it starts get exactly their three standard
// handles and the environment they are given, their arguments arrive as they were, their output is
// read through the event loop (an overlapped named pipe in Asio's stream_handle), their exit is
// waited on there too (the process handle in Asio's object_handle), and ending one ends its whole
// job; and a run log's worker ended while appending, after a count of records or at random
// moments, releases the log's lock and loses nothing it reported durable (file_run_log.cpp on
// durable_file_windows.cpp). psych-windows-host-parts-tests.exe (with test_files_windows.cpp and
// the rest): run under Wine here (ctest case windows_host.parts) and natively in the CI matrix's
// Windows job (scripts/test-windows-launcher).
//
// The binary is its own child: `--child ACTION ...` runs one action instead of the tests.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <windows.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/windows/object_handle.hpp>
#include <boost/asio/windows/stream_handle.hpp>

#include "backends/backend_support.hpp"  // child_environment
#include "os/child_process.hpp"
#include "os/child_streams.hpp"
#include "os/os_handle.hpp"
#include "parts.hpp"
#include "psych/host/run_log.hpp"
#include "os/random_hex.hpp"
#include "run_log_files.hpp"  // tests/unit: large_record
#include "skip.hpp"
#include "temp_dir.hpp"
#include "platform/windows/environment_block.hpp"
#include "platform/windows/text.hpp"

using namespace psych;
using psych::testing::windows_host::own_path;
using psych::testing::windows_host::under_wine;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

// ---- the child's side -------------------------------------------------------

void write_all(HANDLE to, const std::string& text) {
  DWORD written = 0;
  ::WriteFile(to, text.data(), static_cast<DWORD>(text.size()), &written, nullptr);
}

/// One action of the child; its exit status.
int child_main(int argc, wchar_t** argv) {
  const std::wstring action = argv[2];
  const HANDLE out = ::GetStdHandle(STD_OUTPUT_HANDLE);
  if (action == L"output" && argc == 6) {  // OUT ERR STATUS
    write_all(out, windows::narrow(argv[3]));
    write_all(::GetStdHandle(STD_ERROR_HANDLE), windows::narrow(argv[4]));
    return std::stoi(argv[5]);
  }
  if (action == L"environment") {  // every variable, one a line
    const wchar_t* block = ::GetEnvironmentStringsW();
    std::string text;
    for (const wchar_t* entry = block; *entry != L'\0'; entry += std::wcslen(entry) + 1)
      text += windows::narrow(entry) + "\n";
    write_all(out, text);
    return 0;
  }
  if (action == L"arguments") {  // each argument after the action, one a line
    std::string text;
    for (int i = 3; i < argc; ++i) text += windows::narrow(argv[i]) + "\n";
    write_all(out, text);
    return 0;
  }
  if (action == L"handle" && argc == 4) {  // whether the handle value given is open here
    const auto value = static_cast<std::uintptr_t>(std::stoull(windows::narrow(argv[3])));
    DWORD flags = 0;
    write_all(out, ::GetHandleInformation(reinterpret_cast<HANDLE>(value), &flags) ? "open" : "closed");
    return 0;
  }
  if (action == L"grandchild") {  // starts `--child sleep`, prints its pid, and sleeps
    std::wstring self(32768, L'\0');
    self.resize(::GetModuleFileNameW(nullptr, self.data(), static_cast<DWORD>(self.size())));
    std::wstring line = L"\"" + self + L"\" --child sleep";
    STARTUPINFOW startup{};
    startup.cb = sizeof(startup);
    PROCESS_INFORMATION started{};
    if (!::CreateProcessW(self.c_str(), line.data(), nullptr, nullptr, FALSE, CREATE_NO_WINDOW, nullptr, nullptr,
                          &startup, &started))
      return 2;
    ::CloseHandle(started.hThread);
    ::CloseHandle(started.hProcess);
    write_all(out, std::to_string(started.dwProcessId) + "\n");
    ::Sleep(INFINITE);
  }
  if (action == L"append-run-log" && argc == 4) {
    // Opens the log and goes on appending large_record(i) durably from where it ends, writing 'd'
    // after each (at most 400: the host may be slow to end it), then sleeps.
    auto log = open_file_run_log(windows::narrow(argv[3]));
    if (!log) return 3;
    const std::size_t first = log.value()->records().value().size();
    for (std::size_t i = first; i < first + 400; ++i) {
      if (!log.value()->append(psych::testing::large_record(i))) return 3;
      write_all(out, "d");
    }
    ::Sleep(INFINITE);
  }
  if (action == L"append-run-log-mixed" && argc == 4) {
    // Opens the log and says "open", then appends large_record(i) from where the log ends, two of
    // every three deferred and the third durable, after which it writes that record's index: every
    // record up to it is durable then. At most 60 records (the host ends it long before, at a
    // random moment), then it sleeps.
    auto log = open_file_run_log(windows::narrow(argv[3]));
    if (!log) return 3;
    const auto records = log.value()->records();
    if (!records) return 3;
    write_all(out, "open\n");
    for (std::size_t i = records.value().size(), last = i + 60; i < last; ++i) {
      const bool durable = i % 3 == 2;
      const auto record = psych::testing::large_record(i);
      const auto appended = durable ? log.value()->append(record) : log.value()->append_deferred(record);
      if (!appended) return 3;
      if (durable) write_all(out, std::to_string(i) + "\n");
    }
    ::Sleep(INFINITE);
  }
  if (action == L"mcp-server") return psych::testing::windows_host::mcp_server_main();
  if (action == L"sleep") ::Sleep(INFINITE);
  return 99;
}

// ---- the host's side --------------------------------------------------------

/// Reaps `child`, ending it by its own handle first should it still run 10 s after it was to end:
/// a job that did not end it fails the test instead of hanging it.
host::exit_status reap_surely(host::child_process& child) {
  if (!child.wait_exit(10s)) {
    FAIL_CHECK("the child did not end");
    host::child_process::signal_held(child.pid(), child.pidfd(), host::ending::kill);
  }
  return child.reap();
}

/// Ends `pid` if it still runs (what a failed case left), and says whether it was gone already.
bool gone_or_ended(DWORD pid, std::chrono::milliseconds limit) {
  HANDLE process = ::OpenProcess(SYNCHRONIZE | PROCESS_TERMINATE, FALSE, pid);
  if (process == nullptr) return true;
  const bool ended = ::WaitForSingleObject(process, static_cast<DWORD>(limit.count())) == WAIT_OBJECT_0;
  if (!ended) ::TerminateProcess(process, 1);
  ::CloseHandle(process);
  return ended;
}

/// What a child wrote and how it ended, read as the session reads a launcher: both pipes drained
/// and the exit awaited on one event loop.
struct observed {
  std::string out, err;
  bool exited = false;
  host::exit_status status;
};

void drain(host::pipe_stream& pipe, std::string& into) {
  auto buffer = std::make_shared<std::array<char, 4096>>();
  pipe.async_read_some(asio::buffer(*buffer), [&pipe, &into, buffer](boost::system::error_code ec, std::size_t n) {
    if (ec) return;
    into.append(buffer->data(), n);
    drain(pipe, into);
  });
}

/// Starts `argv` with fresh output pipes and runs the loop until the child exited and both pipes
/// ended, or `limit` passed (then the child is ended).
observed run(std::vector<std::string> argv, std::vector<std::string> environment = {},
             std::chrono::milliseconds limit = 20s) {
  observed seen;
  auto out = host::output_pipe();
  auto err = host::output_pipe();
  REQUIRE_MESSAGE(out, (out ? "" : out.error().message()));
  REQUIRE_MESSAGE(err, (err ? "" : err.error().message()));
  auto child = host::child_process::spawn({.argv = std::move(argv),
                                           .environment = std::move(environment),
                                           .descriptors = {host::no_os_handle, out.value().second.get(),
                                                           err.value().second.get()}});
  REQUIRE_MESSAGE(child, (child ? "" : child.error().message()));
  out.value().second.reset();  // the child's now: holding it would hide the end of its output
  err.value().second.reset();
  asio::io_context io;
  host::pipe_stream out_stream(io, out.value().first.release());
  host::pipe_stream err_stream(io, err.value().first.release());
  host::exit_watch exit(io);
  HANDLE process_copy = nullptr;
  REQUIRE(::DuplicateHandle(::GetCurrentProcess(), child.value().pidfd(), ::GetCurrentProcess(), &process_copy, 0,
                            FALSE, DUPLICATE_SAME_ACCESS));
  exit.assign(process_copy);
  host::async_wait_exit(exit, [&](boost::system::error_code ec) { seen.exited = !ec; });
  drain(out_stream, seen.out);
  drain(err_stream, seen.err);
  io.run_for(limit);
  if (!seen.exited) child.value().signal_group(host::ending::kill);
  seen.status = reap_surely(child.value());
  return seen;
}

/// Bytes from an overlapped pipe, read plainly (one at a time), until `count` of them or a newline;
/// fewer when the pipe ended first.
std::string read_bytes(HANDLE pipe, std::size_t count) {
  std::string bytes;
  char c = 0;
  DWORD got = 0;
  OVERLAPPED overlapped{};
  overlapped.hEvent = ::CreateEventW(nullptr, TRUE, FALSE, nullptr);
  while (bytes.size() < count && !bytes.ends_with('\n')) {
    ::ResetEvent(overlapped.hEvent);
    if (!::ReadFile(pipe, &c, 1, nullptr, &overlapped) && ::GetLastError() != ERROR_IO_PENDING) break;
    if (!::GetOverlappedResult(pipe, &overlapped, &got, TRUE) || got != 1) break;
    bytes.push_back(c);
  }
  ::CloseHandle(overlapped.hEvent);
  return bytes;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> all;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) all.push_back(line);
  return all;
}


}  // namespace

TEST_CASE("a child's output arrives through overlapped pipes on the event loop, and its exit status with it") {
  const auto seen = run({own_path(), "--child", "output", "to stdout", "to stderr", "3"});
  CHECK(seen.exited);
  CHECK(seen.out == "to stdout");
  CHECK(seen.err == "to stderr");
  CHECK(seen.status.code == 3);
  CHECK(seen.status.text() == "exited with status 3");
}

TEST_CASE("a child's environment is exactly the list it is given") {
  const auto seen = run({own_path(), "--child", "environment"}, {"PSYCH_ONE=1", "PSYCH_TWO=two words"});
  CHECK(seen.status.code == 0);
  auto variables = lines(seen.out);
  INFO("the child saw: " << seen.out);
  // Windows adds nothing to a block it is given. Wine adds its own WINE* variables, and SystemDrive
  // and SystemRoot where the block has none.
  if (under_wine())
    std::erase_if(variables, [](const std::string& v) {
      return v.starts_with("WINE") || v.starts_with("SystemDrive=") || v.starts_with("SystemRoot=");
    });
  CHECK(variables == std::vector<std::string>{"PSYCH_ONE=1", "PSYCH_TWO=two words"});
}

TEST_CASE("the child's environment on Windows: SystemRoot and the system's PATH, the allowlist, one name per variable") {
  ::SetEnvironmentVariableW(L"PSYCH_CASE_VALUE", L"caf\u00e9 \u4e2d");  // beyond the ANSI code page
  const auto env = host::child_environment({"Path", "systemroot", "PSYCH_CASE_VALUE", "psych_case_value", "PSYCH_UNSET"});
  ::SetEnvironmentVariableW(L"PSYCH_CASE_VALUE", nullptr);
  std::wstring root(MAX_PATH, L'\0');
  root.resize(::GetEnvironmentVariableW(L"SystemRoot", root.data(), static_cast<DWORD>(root.size())));
  REQUIRE_FALSE(root.empty());
  const auto system_root = windows::narrow(root);
  std::string shown;
  for (const auto& [name, value] : env) shown += name + "=" + value + "\n";
  INFO("the environment:\n" << shown);
  CHECK(env == std::map<std::string, std::string>{{"PATH", system_root + "\\System32;" + system_root},
                                                  {"PSYCH_CASE_VALUE", "caf\xc3\xa9 \xe4\xb8\xad"},
                                                  {"PYTHONDONTWRITEBYTECODE", "1"},
                                                  {"SystemRoot", system_root}});
  // What the launcher's block builder takes: no two names that are one variable.
  CHECK(windows::build_environment_block(env));
}

TEST_CASE("an environment Windows would read otherwise than the host meant is refused, naming it") {
  auto refused = host::child_process::spawn({.argv = {own_path(), "--child", "environment"},
                                             .environment = {"Path=a", "PATH=b"},
                                             .descriptors = {}});
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message().find("PATH is set twice but for case") != std::string::npos);
}

TEST_CASE("arguments arrive as they were: spaces, quotes, backslashes and empty ones") {
  const std::vector<std::string> arguments{"plain", "two words", "a \"quoted\" word", "trailing\\", "C:\\dir with space\\",
                                           "", "back\\\\\"slash"};
  std::vector<std::string> argv{own_path(), "--child", "arguments"};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  const auto seen = run(argv);
  CHECK(seen.status.code == 0);
  CHECK(lines(seen.out) == arguments);
}

TEST_CASE("a child inherits none of the host's handles, inheritable ones included") {
  SECURITY_ATTRIBUTES inheritable{sizeof(SECURITY_ATTRIBUTES), nullptr, TRUE};
  const HANDLE event = ::CreateEventW(&inheritable, TRUE, FALSE, nullptr);
  REQUIRE(event != nullptr);
  const auto value = std::to_string(reinterpret_cast<std::uintptr_t>(event));
  const auto seen = run({own_path(), "--child", "handle", value});
  ::CloseHandle(event);
  CHECK(seen.status.code == 0);
  CHECK(seen.out == "closed");
}

TEST_CASE("ending a child ends its job: what it started goes with it") {
  auto out = host::output_pipe();
  REQUIRE(out);
  auto child = host::child_process::spawn(
      {.argv = {own_path(), "--child", "grandchild"}, .descriptors = {host::no_os_handle, out.value().second.get()}});
  REQUIRE_MESSAGE(child, (child ? "" : child.error().message()));
  out.value().second.reset();
  // The grandchild's pid: one line, then the child sleeps.
  const std::string line = read_bytes(out.value().first.get(), 64);
  REQUIRE_MESSAGE(line.ends_with('\n'), "the child printed no grandchild pid: " << line);
  const auto grandchild = static_cast<DWORD>(std::stoul(line));
  CHECK(child.value().status_text(200ms) == "still running");
  HANDLE grandchild_process = ::OpenProcess(SYNCHRONIZE, FALSE, grandchild);
  REQUIRE(grandchild_process != nullptr);
  CHECK(::WaitForSingleObject(grandchild_process, 0) == WAIT_TIMEOUT);
  ::CloseHandle(grandchild_process);
  child.value().signal_group(host::ending::kill);
  CHECK(child.value().wait_exit(10s));
  CHECK(child.value().status_text(0ms) == "exited with status 1");
  CHECK(gone_or_ended(grandchild, 10s));
  CHECK(reap_surely(child.value()).code == 1);
  CHECK(child.value().pidfd() == host::no_os_handle);
}

/// A run log's worker (this binary as `--child ACTION path`) and the read end of its stdout, where it
/// says what it made durable.
struct log_worker {
  host::child_process process;
  host::unique_os_handle says;
};

log_worker start_log_worker(const char* action, const std::string& path) {
  auto out = host::output_pipe();
  REQUIRE(out);
  auto child = host::child_process::spawn({.argv = {own_path(), "--child", action, path},
                                           .descriptors = {host::no_os_handle, out.value().second.get()}});
  REQUIRE_MESSAGE(child, (child ? "" : child.error().message()));
  return {std::move(child).value(), std::move(out.value().first)};
}

/// The log reopened once its holder was ended. Windows releases a dead holder's lock "depending
/// upon available system resources": a refusal as held is retried for 5 s, any other error is not.
std::unique_ptr<run_log> reopened_after_kill(const std::string& path) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  auto log = open_file_run_log(path);
  while (!log && log.error().detail.find("held by another process") != std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
    log = open_file_run_log(path);
  }
  REQUIRE_MESSAGE(log, (log ? "" : log.error().message()));
  return std::move(log).value();
}

// The Windows side of test_run_log_posix.cpp's "a worker SIGKILLed while appending loses nothing it
// reported durable": the worker's job is ended (TerminateJobObject) after it has said so of 1, 7 and
// 20 more records, and the log must then open, from a lock Windows released, with every one of them.
TEST_CASE("run log: a worker ended while appending releases the log and loses nothing it reported durable") {
  const psych::testing::temp_dir dir("psych-run-log-test");
  const std::string path = dir.file("run.log");
  std::size_t durable_before = 0;
  for (const std::size_t reported : {1u, 7u, 20u}) {
    CAPTURE(reported);
    auto worker = start_log_worker("append-run-log", path);
    std::size_t seen = 0;
    while (seen < reported && read_bytes(worker.says.get(), 1) == "d") ++seen;
    REQUIRE_MESSAGE(seen == reported, "the worker stopped: " << worker.process.status_text(5s));
    const auto held = open_file_run_log(path);
    REQUIRE_FALSE(held);
    CHECK(held.error().detail == "LockFileEx(" + path + "): run log is held by another process");
    worker.process.signal_group(host::ending::kill);
    CHECK(reap_surely(worker.process).code == 1);

    auto records = reopened_after_kill(path)->records();
    REQUIRE(records);
    CHECK(records.value().size() >= durable_before + reported);
    for (std::size_t i = 0; i < records.value().size(); ++i) {
      CAPTURE(i);
      CHECK(records.value()[i] == psych::testing::large_record(i));
    }
    durable_before = records.value().size();
  }
}

// The Windows side of test_run_log_posix.cpp's kills at random points: the log's own worker
// (no session: under Wine every run is refused before it starts) is ended at a random moment,
// over and over on one log, so that kills land while it starts, opens the log and repairs what
// the last kill left, and among its appends of 20 kB records, durable and deferred. After each
// the log must open from a released lock, hold exactly large_record(0..n) in order, and keep
// every record the worker said was durable. A kill inside one WriteFile, leaving a torn record,
// is counted when it happens (the next open zeroes it), not assumed: under Wine the runs here
// met none, and torn records are the deterministic cases' (test_run_log.cpp). PSYCH_CRASH_RUNS
// (default 25) and PSYCH_CRASH_SEED repeat or extend it by hand.
TEST_CASE("run log: a worker ended at random points loses nothing it reported durable") {
  const auto runs = psych::testing::from_environment("PSYCH_CRASH_RUNS", 25);
  const auto seed = psych::testing::from_environment("PSYCH_CRASH_SEED", std::random_device{}());
  std::printf("run log crash test (Windows): %llu runs, PSYCH_CRASH_SEED=%llu\n", runs, seed);
  CAPTURE(seed);
  std::mt19937_64 random{seed};
  // Most kills land among the appends: after the worker said it opened the log. One in four lands
  // anywhere from its start: Wine's process start, the log's opening and the cut of a torn tail.
  std::bernoulli_distribution among_the_appends{0.75};
  std::uniform_int_distribution<int> kill_after_open_us{0, 10'000};
  std::uniform_int_distribution<int> kill_from_start_us{0, 300'000};
  const psych::testing::temp_dir dir("psych-run-log-test");
  const std::string path = dir.file("run.log");
  std::size_t kept = 0, kills_among_appends = 0, torn_tails = 0;
  for (unsigned long long run = 0; run < runs; ++run) {
    CAPTURE(run);
    auto worker = start_log_worker("append-run-log-mixed", path);
    const bool after_open = among_the_appends(random);
    const int delay_us = after_open ? kill_after_open_us(random) : kill_from_start_us(random);
    CAPTURE(after_open);
    CAPTURE(delay_us);
    std::vector<std::string> said;
    if (after_open) said.push_back(read_bytes(worker.says.get(), 32));  // "open", or "" if it died first
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    worker.process.signal_group(host::ending::kill);
    const auto ended = reap_surely(worker.process);
    REQUIRE_MESSAGE(ended.code == 1, "the worker was not the one to end (exit " << ended.code << ")");
    // What it said before it died, to end of file: the last whole index is the last durable record.
    for (std::string line; !(line = read_bytes(worker.says.get(), 32)).empty();) said.push_back(line);
    std::optional<std::size_t> durable_up_to;
    for (const auto& line : said)
      if (line.ends_with('\n') && line != "open\n") durable_up_to = std::stoull(line);
    if (durable_up_to) ++kills_among_appends;

    const auto left_by_the_kill = psych::testing::contents_of(path);
    const auto log = reopened_after_kill(path);
    const auto records = log->records();
    REQUIRE(records);
    const auto& found = records.value();
    CHECK(found.size() >= kept);  // what a reopen read whole stays: a kill is not a power cut
    if (durable_up_to) CHECK(found.size() > *durable_up_to);
    for (std::size_t i = 0; i < found.size(); ++i)
      if (!(found[i] == psych::testing::large_record(i))) FAIL_CHECK("record " << i << " is not the one appended");
    kept = found.size();
    // Opening changes the file only to repair what the kill left: a torn record zeroed.
    if (psych::testing::contents_of(path) != left_by_the_kill) ++torn_tails;
  }
  MESSAGE(runs << " kills, " << kills_among_appends << " of them after a durable append, " << torn_tails
               << " leaving a torn record that the next open zeroed; " << kept << " records of about 20 kB kept");
}

TEST_CASE("a released child outlives its job's handle, and is ended by its own") {
  auto child = host::child_process::spawn({.argv = {own_path(), "--child", "sleep"}, .descriptors = {}});
  REQUIRE(child);
  const auto held = child.value().release();
  CHECK(child.value().pid() == -1);
  const host::unique_os_handle process{held.pidfd};
  CHECK(::WaitForSingleObject(process.get(), 300) == WAIT_TIMEOUT);  // the job closed without killing it
  host::child_process::signal_held(held.pid, held.pidfd, host::ending::kill);
  CHECK(host::child_process::reap_pidfd(held.pid, held.pidfd).code == 1);
}

TEST_CASE("a program is found on the host's PATH only when asked, never in the current directory") {
  const auto self = std::filesystem::path(windows::widen(own_path()));
  std::wstring saved(32768, L'\0');
  saved.resize(::GetEnvironmentVariableW(L"PATH", saved.data(), static_cast<DWORD>(saved.size())));
  ::SetEnvironmentVariableW(L"PATH", self.parent_path().c_str());
  const auto name = windows::narrow(self.stem().native());  // without ".exe": the search adds it
  auto found = host::child_process::spawn({.argv = {name, "--child", "output", "", "", "5"}, .search_path = true});
  ::SetEnvironmentVariableW(L"PATH", L"C:\\nonexistent");
  std::wstring here(MAX_PATH, L'\0');
  here.resize(::GetCurrentDirectoryW(MAX_PATH, here.data()));
  ::SetCurrentDirectoryW(self.parent_path().c_str());
  auto from_current = host::child_process::spawn({.argv = {name, "--child", "sleep"}, .search_path = true});
  ::SetCurrentDirectoryW(here.c_str());
  ::SetEnvironmentVariableW(L"PATH", saved.c_str());
  REQUIRE_MESSAGE(found, (found ? "" : found.error().message()));
  CHECK(reap_surely(found.value()).code == 5);
  REQUIRE_FALSE(from_current);
  CHECK(from_current.error().message().find("not found on PATH") != std::string::npos);
}

TEST_CASE("what cannot be started is an error naming the call, not a child") {
  auto missing = host::child_process::spawn({.argv = {"C:\\nonexistent\\program.exe"}});
  REQUIRE_FALSE(missing);
  CHECK(missing.error().call.starts_with("CreateProcessW(C:\\nonexistent\\program.exe)"));
  CHECK(missing.error().error != 0);
  auto fourth = host::child_process::spawn({.argv = {own_path()}, .descriptors = {nullptr, nullptr, nullptr, nullptr}});
  REQUIRE_FALSE(fourth);
  CHECK(fourth.error().error == ERROR_NOT_SUPPORTED);
  auto quoted = host::child_process::spawn({.argv = {"C:\\a\"b.exe"}});
  REQUIRE_FALSE(quoted);
  CHECK(quoted.error().error == ERROR_INVALID_NAME);
}

TEST_CASE("an NTSTATUS exit reads as the exception it is") {
  CHECK(host::exit_status{static_cast<int>(0xC0000005u)}.text() == "ended with exception 0xC0000005");
  CHECK(host::exit_status{-1}.text() == "ended in a way that could not be read");
}

TEST_CASE("random_hex comes from the system's generator: the length asked, hex, never the same twice") {
  const auto a = host::random_hex(16), b = host::random_hex(16);
  CHECK(a.size() == 32);
  CHECK(a.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(a != b);
  CHECK(host::random_hex(0).empty());
}

int wmain(int argc, wchar_t** argv) {
  if (argc >= 3 && std::wstring_view(argv[1]) == L"--child") return child_main(argc, argv);
  std::vector<std::string> narrowed;
  for (int i = 0; i < argc; ++i) narrowed.push_back(windows::narrow(argv[i]));
  std::vector<char*> pointers;
  for (auto& argument : narrowed) pointers.push_back(argument.data());
  doctest::Context context(argc, pointers.data());
  return psych::testing::exit_status(context.run());
}
