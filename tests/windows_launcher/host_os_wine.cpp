// host_os.hpp from Linux: psych-launch-windows.exe runs under wine64 in a throwaway WINEPREFIX,
// which a process of this test keeps alive across the launches and which ends with the test
// binary (`wineserver -k`, then the directory removed).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <thread>

#include "host_os.hpp"
#include "temp_dir.hpp"

namespace psych::testing::windows::os {

using namespace std::chrono_literals;

namespace {

constexpr std::string_view wine64_path = PSYCH_WINE64;
constexpr std::string_view launcher_exe = PSYCH_WINDOWS_LAUNCHER;
constexpr std::string_view test_child_exe = PSYCH_WINDOWS_TEST_CHILD;

bool executable(std::string_view path) { return !path.empty() && ::access(std::string(path).c_str(), X_OK) == 0; }
bool readable(std::string_view path) { return !path.empty() && ::access(std::string(path).c_str(), R_OK) == 0; }

std::string system_error_text(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

/// wineserver beside wine64 (Debian: /usr/lib/wine/), else on PATH.
std::string wineserver_path() {
  const auto beside = std::filesystem::path(wine64_path).parent_path() / "wineserver";
  return ::access(beside.c_str(), X_OK) == 0 ? beside.string() : std::string("wineserver");
}

std::vector<char*> pointers_to(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

/// Starts `argv` with `environment` and /dev/null as its stdio; its pid, or -1.
pid_t start_quietly(std::vector<std::string> argv, std::vector<std::string> environment) {
  auto args = pointers_to(argv);
  auto env = pointers_to(environment);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execvpe(args[0], args.data(), env.data());
    ::_exit(127);
  }
  return pid;
}

/// Runs `argv` with `environment` and waits for it; its exit status, or -1.
int run_and_wait(std::vector<std::string> argv, std::vector<std::string> environment) {
  const pid_t pid = start_quietly(std::move(argv), std::move(environment));
  if (pid < 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// A WINEPREFIX of its own in a temp dir, made on first use (wineboot) and ended with the test
/// binary: its wineserver is stopped (`wineserver -k`) and the directory removed.
class wine_prefix {
 public:
  static wine_prefix& shared() {
    static wine_prefix prefix;
    return prefix;
  }
  wine_prefix(const wine_prefix&) = delete;
  wine_prefix& operator=(const wine_prefix&) = delete;

  ~wine_prefix() {
    // Every process of this prefix ends with its wineserver; nothing of it is left behind.
    run_and_wait({wineserver_path(), "-k"}, environment());
    if (keeper_ > 0) {
      ::kill(keeper_, SIGKILL);
      ::waitpid(keeper_, nullptr, 0);
    }
  }

  /// WINEPREFIX, WINEDEBUG and the rest of the environment every Wine process here gets.
  [[nodiscard]] std::vector<std::string> environment() const {
    return {"WINEPREFIX=" + (dir_.path() / "prefix").string(),
            // Wine's own diagnostics off; no Mono or Gecko installer offered while the prefix is made.
            "WINEDEBUG=-all", "WINEDLLOVERRIDES=mscoree=;mshtml=", "HOME=" + (dir_.path() / "home").string(),
            // Debian's Wine makes its server's socket directory under TMPDIR (/tmp/wine-XXXXXX) and
            // leaves it behind when the server exits; inside the prefix's directory it goes with it.
            "TMPDIR=" + (dir_.path() / "tmp").string(), "PATH=/usr/local/bin:/usr/bin:/bin"};
  }
  [[nodiscard]] double creation_seconds() const { return creation_seconds_; }

 private:
  wine_prefix() : dir_("psych-wine") {
    std::filesystem::create_directories(dir_.path() / "home");
    std::filesystem::create_directories(dir_.path() / "tmp");
    const auto start = std::chrono::steady_clock::now();
    // The first Wine process creates the prefix; wineboot does only that.
    run_and_wait({std::string(wine64_path), "wineboot", "--init"}, environment());
    creation_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // Wine starts its own services (services.exe, winedevice, explorer) with the first process of
    // a session, and they inherit that process's stdio. A process that outlives every launch keeps
    // the session, and so those services, started here with /dev/null: otherwise each launch's
    // would hold the program's output pipes open after the launcher exits.
    keeper_ = start_quietly({std::string(wine64_path), std::string(test_child_exe), "--sleep", "86400"}, environment());
  }

  temp_dir dir_;
  double creation_seconds_ = 0;
  pid_t keeper_ = -1;
};

std::string drain(int& fd) {
  std::string text;
  char buffer[4096];
  // The launcher closed its copies and the tree is gone: end of file comes; a bound keeps a
  // leftover writer from hanging the test.
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (fd >= 0) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, milliseconds_until(until)) <= 0) break;
    const auto n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  if (fd >= 0) ::close(fd);
  fd = -1;
  return text;
}

}  // namespace

std::optional<std::string> why_launcher_cannot_run() {
  if (!readable(launcher_exe) || !readable(test_child_exe))
    return std::string("psych-launch-windows.exe was not built: mingw-w64 (g++-mingw-w64-x86-64-posix) was not "
                       "found when this build was configured");
  if (!executable(wine64_path))
    return std::string("wine64 is not installed (Debian: apt-get install wine64), so the Windows launcher cannot run here");
  return std::nullopt;
}

bool under_wine() { return true; }

std::optional<double> setup_seconds() { return wine_prefix::shared().creation_seconds(); }

std::string launcher_path_of(const std::filesystem::path& path) {
  std::string out = "Z:" + path.string();
  std::replace(out.begin(), out.end(), '/', '\\');
  return out;
}

std::filesystem::path test_child() { return std::string(test_child_exe); }


std::vector<std::string> wine_launcher_command() { return {std::string(wine64_path), std::string(launcher_exe)}; }

std::vector<std::string> wine_environment() { return wine_prefix::shared().environment(); }

// ---- the launcher ------------------------------------------------------------------------

struct launcher_process::state {
  pid_t pid = -1;
  int stdout_fd = -1, stderr_fd = -1;
};

launcher_process::launcher_process(const std::vector<std::pair<std::string, std::string>>& extra_environment,
                                   const std::filesystem::path& stdin_file)
    : state_(std::make_unique<state>()) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error(system_error_text("pipe2"));
  auto environment = wine_environment();
  for (const auto& [name, value] : extra_environment) environment.push_back(name + "=" + value);
  auto argv = wine_launcher_command();
  auto args = pointers_to(argv);
  auto env = pointers_to(environment);
  const int input = ::open(stdin_file.c_str(), O_RDONLY | O_CLOEXEC);
  if (input < 0) throw std::runtime_error(system_error_text("open decoy"));
  state_->pid = ::fork();
  if (state_->pid < 0) throw std::runtime_error(system_error_text("fork"));
  if (state_->pid == 0) {
    ::dup2(input, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execve(args[0], args.data(), env.data());
    ::_exit(127);
  }
  ::close(input);
  ::close(out[1]);
  ::close(err[1]);
  state_->stdout_fd = out[0];
  state_->stderr_fd = err[0];
}

launcher_process::~launcher_process() {
  if (state_->pid > 0) {
    ::kill(state_->pid, SIGKILL);
    ::waitpid(state_->pid, nullptr, 0);
  }
  for (const int fd : {state_->stdout_fd, state_->stderr_fd})
    if (fd >= 0) ::close(fd);
}

int launcher_process::wait(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (std::chrono::steady_clock::now() < until) {
    const pid_t done = ::waitpid(state_->pid, &status, WNOHANG);
    if (done == state_->pid) {
      state_->pid = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(10ms);
  }
  ::kill(state_->pid, SIGKILL);
  ::waitpid(state_->pid, nullptr, 0);
  state_->pid = -1;
  return -1;
}

void launcher_process::kill() {
  if (state_->pid > 0) ::kill(state_->pid, SIGKILL);
}

std::string launcher_process::drain_stdout() { return drain(state_->stdout_fd); }
std::string launcher_process::drain_stderr() { return drain(state_->stderr_fd); }

// A Windows process's command line shows in /proc/<pid>/cmdline under Wine.
std::vector<process_id> processes_with(std::string_view marker) {
  std::vector<process_id> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const auto name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    std::ifstream file(entry.path() / "cmdline", std::ios::binary);
    const std::string cmdline((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    if (cmdline.find(marker) != std::string::npos) found.push_back(std::stoll(name));
  }
  return found;
}

void kill_process(process_id process) { ::kill(static_cast<pid_t>(process), SIGKILL); }

}  // namespace psych::testing::windows::os
