// `psych mcp --listen` as an operator runs it: psych hands it to psych-remote, which says where it
// listens, serves a client, re-reads its tokens on SIGHUP and ends on SIGTERM with status 0; and
// plaintext off loopback is refused before anything listens.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "mcp_http_support.hpp"
#include "service_kit.hpp"

using namespace mcp_http_test;
using namespace std::chrono_literals;

namespace {

/// psych with these arguments, its standard error in a file; killed (by its pid) if still running
/// when this goes.
class psych_process {
 public:
  psych_process(const std::vector<std::string>& arguments, const std::string& error_file) {
    std::vector<std::string> argv{PSYCH_CLI};
    argv.insert(argv.end(), arguments.begin(), arguments.end());
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&files, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&files, 2, error_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    char path_variable[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
    char* environment[] = {path_variable, nullptr};
    if (::posix_spawn(&pid_, args[0], &files, nullptr, args.data(), environment) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&files);
  }
  ~psych_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait(10s);
    }
  }
  psych_process(const psych_process&) = delete;
  psych_process& operator=(const psych_process&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }
  /// Its exit status once it has ended within `limit`; -1 while it runs.
  int wait(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (std::chrono::steady_clock::now() >= deadline) return -1;
      std::this_thread::sleep_for(20ms);
    }
  }

 private:
  pid_t pid_ = -1;
};

/// The file's text once it holds `text`, or whatever it holds when `limit` has passed.
std::string wait_for_text(const std::string& path, const std::string& text, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    auto seen = remote_test::read_file(path);
    if (seen.find(text) != std::string::npos || std::chrono::steady_clock::now() >= deadline) return seen;
    std::this_thread::sleep_for(20ms);
  }
}

/// The arguments that let psych run programs here: as root a config that runs them as child_uid
/// under `dir`, otherwise --allow-same-uid.
std::vector<std::string> deployment(const psych::testing::temp_dir& dir) {
  if (::geteuid() != 0) return {"--allow-same-uid"};
  remote_test::write_file(dir.file("config.json"), R"({"run_as_uid": )" + std::to_string(child_uid) +
                                                       R"(, "temp_root": ")" + dir.path().string() + "\"}");
  return {"--config", dir.file("config.json")};
}

}  // namespace

TEST_CASE("psych mcp --listen serves until SIGTERM, re-reads its tokens on SIGHUP, and exits 0") {
  psych::testing::temp_dir dir("psych-mcp-http-cli", 0711);
  const auto token = remote_test::fresh_token();
  remote_test::write_file(dir.file("tokens"), "operator " + token + "\n");
  std::vector<std::string> arguments{"mcp", "--listen", "127.0.0.1:0", "--token-file", dir.file("tokens"),
                                     "--blob-dir", dir.file("blobs")};
  for (auto& argument : deployment(dir)) arguments.push_back(std::move(argument));
  psych_process server(arguments, dir.file("mcp.err"));
  REQUIRE(server.pid() > 0);
  const std::string listening = "psych mcp: listening on http://127.0.0.1:";
  const auto said = wait_for_text(dir.file("mcp.err"), listening, 30s);
  const auto at = said.find(listening);
  REQUIRE_MESSAGE(at != std::string::npos, said);
  const int port = std::atoi(said.c_str() + at + listening.size());
  REQUIRE(port > 0);
  CHECK(said.find("/mcp", at) != std::string::npos);
  const endpoint to{static_cast<std::uint16_t>(port), false, token};

  const auto session = open_session(to);
  const auto answered = exchange(
      to, {.body = run_code_text(2, "return 6 * 7"), .session = session, .accept = "application/json"}, 60);
  CHECK_MESSAGE(answered.body.find("\"value\":42") != std::string::npos, answered.body);

  const auto fresh = remote_test::fresh_token();
  remote_test::write_file(dir.file("tokens"), "operator " + fresh + "\n");
  REQUIRE(::kill(server.pid(), SIGHUP) == 0);
  CHECK(wait_for_text(dir.file("mcp.err"), "SIGHUP: tokens re-read", 10s).find("SIGHUP: tokens re-read") !=
        std::string::npos);
  CHECK(exchange(to, {.body = request_text(3, "ping"), .session = session}).status == 401);
  CHECK(exchange(to, {.body = request_text(3, "ping"), .session = session, .token = fresh}).status == 200);

  REQUIRE(::kill(server.pid(), SIGTERM) == 0);
  CHECK(server.wait(30s) == 0);
  CHECK(remote_test::read_file(dir.file("mcp.err")).find("psych mcp: stopped") != std::string::npos);
}

TEST_CASE("psych mcp --listen refuses plaintext on an address that is not loopback") {
  psych::testing::temp_dir dir("psych-mcp-http-cli", 0711);
  remote_test::write_file(dir.file("tokens"), "operator " + remote_test::fresh_token() + "\n");
  std::vector<std::string> argv{PSYCH_CLI, "mcp", "--listen", "0.0.0.0:0", "--token-file", dir.file("tokens"),
                                "--blob-dir", dir.file("blobs")};
  for (auto& argument : deployment(dir)) argv.push_back(std::move(argument));
  const auto run = remote_test::run_process(argv, 30s);
  CHECK(run.exit_code != 0);
  CHECK_MESSAGE(run.output.find("not loopback") != std::string::npos, run.output);
}
