// psych.exe, the command line on Windows (docs/cli.md, "On Windows"), as a user meets it: started
// as a program of its own, finding psych-launch-windows.exe beside itself, reading a program named
// by a path Windows spells in UTF-16, printing its report and ending with the documented status.
// Only in psych-windows-launcher-tests.exe, which the Windows build puts beside psych.exe. Under
// Wine the job reads back no limits, so a run is refused at PROCESS, and that refusal is what the
// cases check there; on Windows itself (the CI matrix) the program must run.
#include <doctest/doctest.h>

#include <windows.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cases.hpp"
#include "host_os.hpp"
#include "platform/windows/command_line.hpp"
#include "platform/windows/text.hpp"
#include "os/random_hex.hpp"

using namespace psych;
using namespace psych::testing::windows;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

fs::path psych_exe() { return os::test_child().parent_path() / "psych.exe"; }

/// A directory of the case's own in the account's temporary directory, removed at the end. Not
/// named psych-…: the cases count those, which must be the executions' alone.
struct scratch_dir {
  fs::path path = fs::temp_directory_path() / ("cli-case-" + host::random_hex(8));
  scratch_dir() { fs::create_directories(path); }
  ~scratch_dir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;

  fs::path write(const std::wstring& name, const std::string& text) const {
    const auto file = path / name;
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }
};

/// `text` as a JSON string's contents (the paths and names here are ASCII or UTF-8 already).
std::string json_escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

/// A config naming the interpreter; the launcher is left to be found beside psych.exe.
fs::path config_for(const scratch_dir& dir, const std::string& interpreter) {
  return dir.write(L"psych.json", "{\"python_bin\": \"" + json_escaped(interpreter) + "\", \"allow_same_uid\": true}");
}

std::string utf8_of(const fs::path& path) { return windows::narrow(path.native()); }

/// psych.exe as a console program of its own: this process's environment and console, stdout and
/// stderr to files, and (new_group) a console process group of its own, which Ctrl+Break can
/// address alone.
class psych_process {
 public:
  psych_process(const scratch_dir& dir, const std::vector<std::string>& arguments, bool new_group = false,
                const fs::path& exe = psych_exe())
      : out_(dir.path / "stdout.txt"), err_(dir.path / "stderr.txt") {
    SECURITY_ATTRIBUTES inheritable{.nLength = sizeof(SECURITY_ATTRIBUTES), .lpSecurityDescriptor = nullptr,
                                    .bInheritHandle = TRUE};
    const auto open = [&](const fs::path& file) {
      return ::CreateFileW(file.c_str(), GENERIC_WRITE, FILE_SHARE_READ, &inheritable, CREATE_ALWAYS,
                           FILE_ATTRIBUTE_NORMAL, nullptr);
    };
    HANDLE out = open(out_), err = open(err_);
    HANDLE in = ::CreateFileW(L"NUL", GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE, &inheritable, OPEN_EXISTING,
                              FILE_ATTRIBUTE_NORMAL, nullptr);
    REQUIRE(out != INVALID_HANDLE_VALUE);
    REQUIRE(err != INVALID_HANDLE_VALUE);
    REQUIRE(in != INVALID_HANDLE_VALUE);
    STARTUPINFOW startup{};
    startup.cb = sizeof startup;
    startup.dwFlags = STARTF_USESTDHANDLES;
    startup.hStdInput = in;
    startup.hStdOutput = out;
    startup.hStdError = err;
    auto line = windows::command_line(utf8_of(exe), arguments);
    PROCESS_INFORMATION created{};
    const BOOL ok = ::CreateProcessW(exe.c_str(), line.data(), nullptr, nullptr, TRUE,
                                     new_group ? CREATE_NEW_PROCESS_GROUP : 0, nullptr, nullptr, &startup, &created);
    const DWORD error = ::GetLastError();
    for (HANDLE handle : {in, out, err}) ::CloseHandle(handle);
    REQUIRE_MESSAGE(ok, "CreateProcessW(psych.exe): " << windows::error_text(error));
    ::CloseHandle(created.hThread);
    process_ = created.hProcess;
    id_ = created.dwProcessId;
  }
  ~psych_process() {
    if (::WaitForSingleObject(process_, 0) != WAIT_OBJECT_0) ::TerminateProcess(process_, 1);
    ::WaitForSingleObject(process_, 5000);
    ::CloseHandle(process_);
  }
  psych_process(const psych_process&) = delete;
  psych_process& operator=(const psych_process&) = delete;

  DWORD id() const { return id_; }

  /// Its exit status, or nullopt when it outlived `timeout` (it is then ended).
  std::optional<DWORD> wait(std::chrono::milliseconds timeout) {
    if (::WaitForSingleObject(process_, static_cast<DWORD>(timeout.count())) != WAIT_OBJECT_0) {
      ::TerminateProcess(process_, 1);
      return std::nullopt;
    }
    DWORD status = 0;
    ::GetExitCodeProcess(process_, &status);
    return status;
  }

  std::string out() const { return read(out_); }
  std::string err() const { return read(err_); }

 private:
  static std::string read(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }

  fs::path out_, err_;
  HANDLE process_ = nullptr;
  DWORD id_ = 0;
};

struct finished {
  DWORD status = 0;
  std::string out, err;
};

finished run_psych(const scratch_dir& dir, const std::vector<std::string>& arguments) {
  psych_process process(dir, arguments);
  const auto status = process.wait(120s);
  REQUIRE_MESSAGE(status, "psych.exe did not finish within 2 minutes");
  return {*status, process.out(), process.err()};
}

bool has(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

/// psych's exit statuses (docs/cli.md, "Exit status").
constexpr DWORD completed = 0, failed = 1, usage_error = 2;

/// Whether this case can run: psych.exe and the launcher were built beside this binary.
bool psych_can_run(std::source_location where = std::source_location::current()) {
  if (!can_run(where)) return false;
  REQUIRE_MESSAGE(fs::exists(psych_exe()), psych_exe().string() << " is missing: the Windows build puts it here");
  return true;
}

}  // namespace

TEST_CASE("psych.exe describe: windows-process with the launcher beside psych.exe, the other systems' rows elsewhere") {
  if (!psych_can_run()) return;
  scratch_dir dir;
  const auto r = run_psych(dir, {"describe", "--config", utf8_of(config_for(dir, utf8_of(os::test_child())))});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  const auto beside = utf8_of(psych_exe().parent_path() / "psych-launch-windows.exe");
  CHECK(has(r.out, "windows-process    process   available     " + beside + " runs " + utf8_of(os::test_child())));
  for (const char* elsewhere : {"linux-process", "linux-namespaces", "macos-process"})
    CHECK(has(r.out, std::string(elsewhere)));
  CHECK(has(r.out, "this host is Windows; psych-launch-linux runs only on Linux"));
  CHECK(has(r.out, "this host is Windows; psych-launch-macos runs only on macOS"));
  if (os::under_wine()) {
    // No job limits read back: not ready, and said once, from the grade.
    CHECK(r.status == failed);
    CHECK(has(r.out, "chosen: none   ready: no   isolation reached: none"));
    CHECK(has(r.out, "windows-process: not ready: isolation_unavailable"));
    CHECK(has(r.out, "isolation_unavailable: requested isolation=process"));
    const auto first = r.out.find("the Job Object did not read back kill-on-close");
    REQUIRE(first != std::string::npos);
    CHECK(r.out.find("the Job Object did not read back kill-on-close", first + 1) == std::string::npos);
  } else {
    CHECK(r.status == completed);
    CHECK(has(r.out, "chosen: windows-process   ready: yes   isolation reached: process"));
  }
}

TEST_CASE("psych.exe run: the program through the launcher, named by a path outside the ANSI code page") {
  if (!psych_can_run()) return;
  scratch_dir dir;
  const auto config = utf8_of(config_for(dir, utf8_of(os::test_child())));
  // Greek, CJK and an emoji: none of them in any ANSI code page together, so a narrow main() or an
  // ANSI file open would not find the file.
  const auto program = dir.write(L"program \u03b1\u4e2d\U0001F600.txt", "print hello through psych.exe\n");
  const auto r = run_psych(dir, {"run", "--config", config, utf8_of(program)});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK_FALSE(has(r.err, "unreadable_file"));
  if (os::under_wine()) {
    CHECK(r.status == failed);
    CHECK(has(r.out, "failure: isolation_unavailable: requested isolation=process"));
    CHECK(has(r.out, "isolation: none (nothing ran)"));
  } else {
    CHECK(r.status == completed);
    CHECK(has(r.out, "  | hello through psych.exe"));
    CHECK(has(r.out, "isolation: process"));
  }
  // --json: the same result as one line of JSON, with \n line ends as on every system.
  const auto json = run_psych(dir, {"run", "--json", "--config", config, utf8_of(program)});
  CHECK(json.out.ends_with("}\n"));
  CHECK_FALSE(has(json.out, "\r"));
  CHECK(has(json.out, os::under_wine() ? "\"isolation_unavailable\"" : "hello through psych.exe"));
}

TEST_CASE("psych.exe installed in a directory named beyond ASCII finds its launcher and an interpreter on PATH there") {
  if (!psych_can_run()) return;
  scratch_dir dir;
  // C:\Users\Jürgen\… is where a per-user install lands: here Greek and CJK as well.
  const auto installed = dir.path / L"J\u00fcrgen \u03b1\u4e2d";
  fs::create_directories(installed);
  fs::copy_file(psych_exe(), installed / "psych.exe");
  fs::copy_file(psych_exe().parent_path() / "psych-launch-windows.exe", installed / "psych-launch-windows.exe");
  // The test child as python.exe: found by the PATH search, not named by the config.
  fs::copy_file(os::test_child(), installed / "python.exe");
  const auto config = dir.write(L"psych.json", "{\"allow_same_uid\": true}");

  std::wstring saved(32768, L'\0');
  saved.resize(::GetEnvironmentVariableW(L"PATH", saved.data(), static_cast<DWORD>(saved.size())));
  ::SetEnvironmentVariableW(L"PATH", (installed.native() + L";" + saved).c_str());
  finished r;
  {
    psych_process process(dir, {"describe", "--config", utf8_of(config)}, false, installed / "psych.exe");
    const auto status = process.wait(120s);
    ::SetEnvironmentVariableW(L"PATH", saved.c_str());
    REQUIRE(status);
    r = {*status, process.out(), process.err()};
  }
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(has(r.out, "windows-process    process   available     " + utf8_of(installed / "psych-launch-windows.exe") +
                       " runs " + utf8_of(installed / "python.exe")));
}

TEST_CASE("psych.exe run: what Windows does not have is refused by name, and a missing file is named") {
  if (!psych_can_run()) return;
  scratch_dir dir;
  const auto program = utf8_of(dir.write(L"program.py", "return 1\n"));
  const auto container = run_psych(dir, {"run", "--backend", "container", program});
  CHECK(container.status == usage_error);
  CHECK(has(container.err, "psych: sandbox_setup: the container backend needs a Linux or macOS host"));
  const auto remote = run_psych(dir, {"run", "--remote", "https://127.0.0.1:9", program});
  CHECK(remote.status == usage_error);
  CHECK(has(remote.err, "psych serve and --remote run in psych-remote, which psych for Windows does not have"));
  const auto tokens = utf8_of(dir.write(L"tokens", "a-token-of-enough-length-for-serve\n"));
  const auto serve = run_psych(dir, {"serve", "--token-file", tokens});
  CHECK(serve.status == usage_error);
  CHECK(has(serve.err, "psych serve and --remote run in psych-remote"));
  const auto missing = utf8_of(dir.path / L"absent \u03b1.py");
  const auto absent = run_psych(dir, {"run", missing});
  CHECK(absent.status == usage_error);
  CHECK(has(absent.err, "psych: unreadable_file: " + missing + ": "));
  const auto described = run_psych(dir, {"describe", "--backend", "container"});
  CHECK(described.status == failed);
  CHECK(has(described.out, "container          isolated  unavailable   the container backend needs a Linux or macOS host"));
}

TEST_CASE("psych.exe run: a real CPython's value and output come back") {
  if (!psych_can_run()) return;
  const char* python = std::getenv("PSYCH_WINDOWS_PYTHON");
  if (python == nullptr || *python == '\0') {
    if (os::under_wine()) {
      psych::testing::skip_case(psych::testing::allowed_in_ci::no_windows_cpython_under_wine,
                                "PSYCH_WINDOWS_PYTHON names no Windows CPython, and none can be installed here "
                                "(docs/windows-launcher.md): the CI matrix's Windows job runs this case");
      return;
    }
    FAIL("PSYCH_WINDOWS_PYTHON names no CPython: on Windows itself psych.exe must run one "
         "(scripts/test-windows-launcher sets it)");
  }
  scratch_dir dir;
  const auto program = dir.write(L"program.py", "print('caf\xc3\xa9 from CPython')\nreturn 6 * 7\n");
  const auto r = run_psych(dir, {"run", "--config", utf8_of(config_for(dir, python)), utf8_of(program)});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.status == completed);
  CHECK(has(r.out, "value: 42"));
  CHECK(has(r.out, "  | caf\xc3\xa9 from CPython"));
  CHECK(has(r.out, "isolation: process"));
}

TEST_CASE("psych.exe run: Ctrl+Break cancels the program, ends what it started, and the result is still printed") {
  if (!psych_can_run()) return;
  if (os::under_wine()) {
    psych::testing::skip_case(psych::testing::allowed_in_ci::no_job_limits_under_wine,
                              "Wine keeps no Job Object limits, so psych.exe refuses the run at PROCESS before its "
                              "program starts and there is nothing to cancel: the CI matrix's Windows job runs this "
                              "case");
    return;
  }
  // A console for the signal to travel through: the CI runner may start this binary without one.
  if (::GetConsoleWindow() == nullptr) ::AllocConsole();
  scratch_dir dir;
  // The sleepers' seconds are this case's own: they are found by their command lines.
  const auto program = dir.write(L"program.txt", "spawn 1 79\nsleep 79\n");
  psych_process running(dir, {"run", "--config", utf8_of(config_for(dir, utf8_of(os::test_child()))), utf8_of(program)}, true);
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (os::processes_with("--sleep 79").empty() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(50ms);
  REQUIRE_MESSAGE(!os::processes_with("--sleep 79").empty(), "the program's child never started");
  REQUIRE(::GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, running.id()));
  const auto status = running.wait(30s);
  INFO("stdout: " << running.out() << "\nstderr: " << running.err());
  REQUIRE_MESSAGE(status, "psych.exe was not ended by the cancellation within 30 s");
  CHECK(*status == failed);
  CHECK(has(running.out(), "failure: cancelled"));
  const auto gone_by = std::chrono::steady_clock::now() + 10s;
  while (!os::processes_with("--sleep 79").empty() && std::chrono::steady_clock::now() < gone_by)
    std::this_thread::sleep_for(50ms);
  const auto left = os::processes_with("--sleep 79");
  for (const auto process : left) os::kill_process(process);
  CHECK(left.empty());
}
