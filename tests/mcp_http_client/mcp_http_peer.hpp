#pragma once
// A peer of tests/mcp_http_client/mcp_http_peers.cjs for one test, shared by the MCP client's tests
// and the conformance case that reaches every kind of source. Started and ended by the host's own
// child_process (its process group killed and reaped if it does not leave when asked).
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include "os/child_process.hpp"
#include "os/posix.hpp"

namespace psych::testing {

/// One mcp_http_peers.cjs process, run by `node`: its stdin a pipe (closing it ends the peer), its
/// port read from its first line.
class mcp_http_peer {
 public:
  mcp_http_peer(const std::string& node, const std::string& script, std::vector<std::string> arguments) {
    auto made_in = host::cloexec_pipe();
    auto made_out = host::cloexec_pipe();
    REQUIRE(made_in.has_value());
    REQUIRE(made_out.has_value());
    host::fd_pair in = std::move(made_in).value();
    host::fd_pair out = std::move(made_out).value();
    std::vector<std::string> argv{node, script};
    argv.insert(argv.end(), arguments.begin(), arguments.end());
    const char* home = std::getenv("HOME");
    auto child = host::child_process::spawn(
        {.argv = argv,
         .environment = {"PATH=/usr/bin:/bin", std::string("HOME=") + (home ? home : "/tmp")},
         .descriptors = {in.first.get(), out.second.get(), 2}});
    REQUIRE_MESSAGE(child.has_value(), (child ? std::string() : child.error().message()));
    child_.emplace(std::move(child).value());
    stdin_ = std::move(in.second);
    // "PORT <n>\n", within 60 s (node loads the SDK slowly on a busy machine).
    const host::unique_fd port_line = std::move(out.first);
    out.second = host::unique_fd{};  // only the peer holds the write end: its exit ends the read
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{port_line.get(), POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;
      char buffer[256];
      const ssize_t n = ::read(port_line.get(), buffer, sizeof buffer);
      if (n <= 0) break;
      line.append(buffer, static_cast<std::size_t>(n));
    }
    REQUIRE_MESSAGE(line.starts_with("PORT "), "the peer did not say its port: " << line);
    port_ = std::stoi(line.substr(5));
  }
  /// Asks the peer to leave (its stdin closed) and gives it 2 s; the child_process then kills what
  /// is left of its group and reaps it.
  ~mcp_http_peer() {
    stdin_ = host::unique_fd{};
    if (child_) (void)child_->wait_exit(std::chrono::seconds(2));
  }
  mcp_http_peer(const mcp_http_peer&) = delete;
  mcp_http_peer& operator=(const mcp_http_peer&) = delete;

  [[nodiscard]] std::string url(std::string_view path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + std::string(path);
  }

 private:
  std::optional<host::child_process> child_;
  host::unique_fd stdin_;
  int port_ = 0;
};

}  // namespace psych::testing
