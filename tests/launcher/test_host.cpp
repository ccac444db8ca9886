#include "test_host.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#ifndef PSYCH_LAUNCHER_PATH
#error "PSYCH_LAUNCHER_PATH must name the psych-launch-linux executable"
#endif

namespace psych::testing {

namespace {

[[noreturn]] void fail_setup(const char* what) {
  throw std::runtime_error(fmt::format("test host: {}: {}", what, std::strerror(errno)));
}

}  // namespace

std::string test_python() {
  if (const char* chosen = std::getenv("PSYCH_TEST_PYTHON")) return chosen;
  return std::filesystem::canonical("/usr/bin/python3").string();
}

scratch::scratch() {
  char root_template[] = "/tmp/psych-launcher-test-XXXXXX";
  if (::mkdtemp(root_template) == nullptr) fail_setup("mkdtemp");
  root = root_template;
  // Traversable by the dropped uid (it must reach the workspace by path); the entries decide.
  ::chmod(root.c_str(), 0711);
  workspace = root + "/workspace";
  tmp = root + "/tmp";
  const std::string canary_dir = root + "/canary";
  for (const auto& dir : {workspace, tmp, canary_dir})
    if (::mkdir(dir.c_str(), 0700) != 0) fail_setup("mkdir");
  canary = canary_dir + "/canary";
  const int fd = ::open(canary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || ::write(fd, "secret\n", 7) != 7) fail_setup("canary");
  ::close(fd);
}

scratch::~scratch() {
  std::error_code ignored;
  std::filesystem::remove_all(root, ignored);
}

protocol::launch_frame default_launch(const scratch& dir) {
  protocol::launch_frame launch;
  launch.token = "0123456789abcdef0123456789abcdef";
  launch.limits.cpu_seconds = 4.5;  // becomes RLIMIT_CPU 5/6: ceil, then one more for the hard limit
  launch.limits.address_space_bytes = std::uint64_t{512} << 20;
  launch.limits.file_size_bytes = std::uint64_t{10} << 20;
  launch.limits.process_count = 64;
  launch.limits.wall_seconds = 20;
  launch.environment = {{"HOME", dir.workspace},
                        {"TMPDIR", dir.tmp},
                        {"PATH", "/usr/local/bin:/usr/bin:/bin"},
                        {"PYTHONDONTWRITEBYTECODE", "1"},
                        {"LC_ALL", "C.UTF-8"}};
  launch.interpreter = test_python();
  launch.workspace = dir.workspace;
  launch.tmp_dir = dir.tmp;
  launch.canary = dir.canary;
  launch.run_as = protocol::identity{test_uid, test_uid};
  launch.allow_same_uid = false;
  launch.open_files = 256;
  return launch;
}

std::optional<std::string> line_source::next(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (const auto newline = buffer_.find('\n'); newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    if (eof_) return std::nullopt;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd ready{fd_, POLLIN, 0};
    if (::poll(&ready, 1, static_cast<int>(left.count())) <= 0) continue;
    char chunk[65536];
    const ssize_t got = ::read(fd_, chunk, sizeof chunk);
    if (got <= 0) eof_ = true;
    else buffer_.append(chunk, static_cast<std::size_t>(got));
  }
}

launcher::launcher() {
  std::signal(SIGPIPE, SIG_IGN);
  int control[2], channel[2], out[2], err[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, control) != 0) fail_setup("socketpair");
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, channel) != 0) fail_setup("socketpair");
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) fail_setup("pipe2");
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0) fail_setup("open /dev/null");

  pid_ = ::fork();
  if (pid_ < 0) fail_setup("fork");
  if (pid_ == 0) {
    // Lift each source above 0-4 first, so no dup2 below overwrites a source still needed.
    const int sources[5] = {null, out[1], err[1], control[1], channel[1]};
    int lifted[5];
    for (int i = 0; i < 5; ++i) lifted[i] = ::fcntl(sources[i], F_DUPFD_CLOEXEC, 10);
    for (int i = 0; i < 5; ++i)
      if (lifted[i] < 0 || ::dup2(lifted[i], i) < 0) ::_exit(126);
    ::close_range(5, ~0U, 0);
    // A variable the child must never see: the launcher builds the child's environment from nothing.
    char secret[] = "PSYCH_TEST_SECRET=must-not-reach-the-child";
    char* const envp[] = {secret, nullptr};
    char path[] = PSYCH_LAUNCHER_PATH;
    char* const argv[] = {path, nullptr};
    ::execve(path, argv, envp);
    ::_exit(127);
  }
  for (const int fd : {null, out[1], err[1], control[1], channel[1]}) ::close(fd);
  control_ = control[0];
  channel_ = channel[0];
  stdout_ = out[0];
  stderr_ = err[0];
  control_lines_ = line_source{control_};
  channel_lines_ = line_source{channel_};
}

launcher::~launcher() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  for (const int fd : {control_, channel_, stdout_, stderr_})
    if (fd >= 0) ::close(fd);
}

void launcher::write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t put = ::write(fd, bytes.data(), bytes.size());
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return;  // the peer is gone: the test's assertions will say what happened
    bytes.remove_prefix(static_cast<std::size_t>(put));
  }
}

void launcher::send_raw(std::string_view bytes) { write_all(control_, bytes); }

void launcher::close_control() {
  ::close(control_);
  control_ = -1;
}

void launcher::end_control_writes() { ::shutdown(control_, SHUT_WR); }

int launcher::wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  // A pidfd turns "wait, but not forever" into one poll().
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  if (pidfd >= 0) {
    pollfd exited{pidfd, POLLIN, 0};
    ::poll(&exited, 1, static_cast<int>(timeout.count()));
    ::close(pidfd);
  }
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return -1;  // still running: the destructor kills it
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string launcher::drain(int fd) {
  std::string text;
  line_source source{fd};
  while (auto line = source.next(5s)) text += *line + '\n';
  return text;
}

rapidjson::Document parse_json(const std::string& text) {
  rapidjson::Document document;
  document.Parse(text.c_str(), text.size());
  return document;
}

bool process_gone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

namespace {

void read_first_reply(launcher& process, execution& outcome) {
  const auto line = process.control_line();
  if (!line) return;
  auto frame = protocol::decode_frame<protocol::started_frame, protocol::launch_error_frame>(*line);
  if (!frame) throw std::runtime_error("launcher sent an undecodable frame: " + *line);
  if (auto* started = std::get_if<protocol::started_frame>(&frame.value())) outcome.started = *started;
  else outcome.error = std::get<protocol::launch_error_frame>(frame.value());
}

void finish(launcher& process, execution& outcome) {
  outcome.launcher_status = process.wait();
  outcome.stdout_text = process.drain_stdout();
  outcome.stderr_text = process.drain_stderr();
}

}  // namespace

execution launch_only(const protocol::launch_frame& launch) {
  launcher process;
  execution outcome;
  process.send(launch);
  read_first_reply(process, outcome);
  finish(process, outcome);
  return outcome;
}

execution run_program(const protocol::launch_frame& launch, std::string_view program,
                      const run_options& options) {
  launcher process;
  execution outcome;
  process.send(launch);
  read_first_reply(process, outcome);
  if (!outcome.started) {
    finish(process, outcome);
    return outcome;
  }
  outcome.hello = process.channel_line();
  process.send_channel(protocol::run_frame{std::string(program), "<program>"});
  if (options.cancel_after) {
    std::this_thread::sleep_for(*options.cancel_after);
    process.send(protocol::cancel_frame{options.cancel_reason});
  }
  // The channel ends without `done` when the tree is killed; `exit` always follows.
  outcome.done = process.channel_line(std::chrono::milliseconds(
      static_cast<long long>(launch.limits.wall_seconds.value * 1000) + 5000));
  if (const auto line = process.control_line(30s)) {
    auto frame = protocol::decode_frame<protocol::exit_frame>(*line);
    if (!frame) throw std::runtime_error("launcher sent an undecodable exit: " + *line);
    outcome.exit = std::get<protocol::exit_frame>(frame.value());
  }
  finish(process, outcome);
  return outcome;
}

}  // namespace psych::testing
