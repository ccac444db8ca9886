#include "service_kit.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "temp_dir.hpp"

extern char** environ;

namespace remote_test {

using psych::testing::temp_dir;

std::string fresh_token() {
  std::random_device device;
  std::string out = "tok-";
  for (int i = 0; i < 32; ++i) out.push_back("0123456789abcdef"[device() % 16]);
  return out;
}

void write_file(const std::string& path, const std::string& text, unsigned mode) {
  {
    std::ofstream out(path, std::ios::trunc | std::ios::binary);
    out << text;
  }
  ::chmod(path.c_str(), mode);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream all;
  all << in.rdbuf();
  return all.str();
}

process_output run_process(const std::vector<std::string>& argv, std::chrono::milliseconds limit) {
  process_output out;
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return out;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (spawned != 0) {
    ::close(pipe_fds[0]);
    out.output = fmt::format("cannot start {}: {}", argv[0], std::strerror(spawned));
    return out;
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  char buffer[65536];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      out.timed_out = true;
      break;
    }
    pollfd p{.fd = pipe_fds[0], .events = POLLIN, .revents = 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const auto n = ::read(pipe_fds[0], buffer, sizeof buffer);
    if (n <= 0) break;
    out.output.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  if (out.timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  out.exit_code = !out.timed_out && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

namespace {

struct generated_certificate {
  temp_dir dir{"psych-remote-cert"};
  certificate files;
  std::string why;
  bool ok = false;

  generated_certificate() {
    files.cert = dir.file("cert.pem");
    files.key = dir.file("key.pem");
    const auto made = run_process({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                                   "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", files.key, "-out", files.cert,
                                   "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                                   "-days", "1"},
                                  std::chrono::seconds(30));
    ok = made.exit_code == 0 && std::filesystem::exists(files.cert) && std::filesystem::exists(files.key);
    if (!ok) why = "the openssl CLI could not make a self-signed certificate: " + made.output.substr(0, 300);
  }
};

/// What `made` made, or null with why it could not.
const certificate* files_or_why(const generated_certificate& made, std::string* why) {
  if (made.ok) return &made.files;
  if (why) *why = made.why;
  return nullptr;
}

}  // namespace

// Each has a static of its own: made once, on first use, and the two certificates differ.
const certificate* test_certificate(std::string* why) {
  static generated_certificate made;
  return files_or_why(made, why);
}

const certificate* other_certificate(std::string* why) {
  static generated_certificate made;
  return files_or_why(made, why);
}

}  // namespace remote_test
