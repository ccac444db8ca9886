#pragma once
// A peer of tests/mcp_http_client/mcp_http_peers.cjs for one test, shared by the MCP client's tests
// and the conformance case that reaches every kind of source.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

extern char** environ;

namespace psych::testing {

/// One mcp_http_peers.cjs process, run by `node`: started with its stdin on a pipe (closing it ends the peer),
/// its port read from its first line; ended by its pid.
class mcp_http_peer {
 public:
  mcp_http_peer(const std::string& node, const std::string& script, std::vector<std::string> arguments) {
    int in[2], out[2];
    REQUIRE(::pipe2(in, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    std::vector<std::string> argv{node, script};
    argv.insert(argv.end(), arguments.begin(), arguments.end());
    std::vector<char*> args(argv.size() + 1, nullptr);  // NULL-terminated, as posix_spawn wants
    std::transform(argv.begin(), argv.end(), args.begin(), [](std::string& a) { return a.data(); });
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_adddup2(&files, in[0], 0);
    posix_spawn_file_actions_adddup2(&files, out[1], 1);
    const int spawned = ::posix_spawn(&pid_, args[0], &files, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&files);
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    REQUIRE(spawned == 0);
    // "PORT <n>\n", within 60 s (node loads the SDK slowly on a busy machine).
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{out[0], POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;
      char buffer[256];
      const ssize_t n = ::read(out[0], buffer, sizeof buffer);
      if (n <= 0) break;
      line.append(buffer, static_cast<std::size_t>(n));
    }
    ::close(out[0]);
    REQUIRE_MESSAGE(line.starts_with("PORT "), "the peer did not say its port: " << line);
    port_ = std::stoi(line.substr(5));
  }
  ~mcp_http_peer() {
    if (stdin_ >= 0) ::close(stdin_);
    if (pid_ <= 0) return;
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  mcp_http_peer(const mcp_http_peer&) = delete;
  mcp_http_peer& operator=(const mcp_http_peer&) = delete;

  [[nodiscard]] std::string url(std::string_view path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + std::string(path);
  }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  int port_ = 0;
};

}  // namespace psych::testing
