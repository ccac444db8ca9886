#pragma once
// A node A2A peer for one test: started with its port and event log in a temporary directory,
// waited for until it listens, and ended (SIGKILL to its process group, reaped) with the object.
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "os/child_process.hpp"
#include "temp_dir.hpp"

namespace psych::testing {

class peer_process {
 public:
  /// `script` is run by node with `arguments`, then --port-file and --log in a fresh directory.
  peer_process(const std::string& script, std::vector<std::string> arguments) : dir_("psych-a2a-peer") {
    std::vector<std::string> argv{PSYCH_NODE, script};
    argv.insert(argv.end(), arguments.begin(), arguments.end());
    argv.insert(argv.end(), {"--port-file", port_file(), "--log", log_file()});
    auto child = host::child_process::spawn({.argv = argv,
                                             .environment = {"PATH=/usr/bin:/bin", "HOME=" + dir_.path().string()},
                                             .descriptors = {host::no_os_handle, host::no_os_handle, 2}});
    REQUIRE_MESSAGE(child.has_value(), (child ? std::string() : child.error().message()));
    child_.emplace(std::move(child).value());
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (port_.empty() && std::chrono::steady_clock::now() < give_up) {
      std::ifstream in{port_file()};
      std::getline(in, port_);
      if (port_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    REQUIRE_MESSAGE(!port_.empty(), "the peer " << script << " did not start listening within 20 s");
  }

  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + port_; }
  [[nodiscard]] pid_t pid() const { return child_->pid(); }

  /// The lines of the peer's event log so far.
  [[nodiscard]] std::vector<std::string> events() const {
    std::ifstream in{log_file()};
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  /// Waits up to `limit` for an event that starts with `prefix`.
  [[nodiscard]] bool saw(const std::string& prefix, std::chrono::milliseconds limit = std::chrono::seconds(5)) const {
    const auto give_up = std::chrono::steady_clock::now() + limit;
    do {
      for (const auto& line : events())
        if (line.starts_with(prefix)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (std::chrono::steady_clock::now() < give_up);
    return false;
  }

 private:
  [[nodiscard]] std::string port_file() const { return (dir_.path() / "port").string(); }
  [[nodiscard]] std::string log_file() const { return (dir_.path() / "log").string(); }

  temp_dir dir_;
  std::optional<host::child_process> child_;  ///< before dir_ is removed: the child goes first
  std::string port_;
};

}  // namespace psych::testing
