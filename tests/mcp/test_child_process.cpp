// child_process (src/host/os/child_process.hpp): the one way the host starts a process, for the
// launcher and the MCP servers alike. What the child gets (descriptors, environment, process
// group) and how it ends (reaped with its status; its group killed whole; nothing left behind).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <thread>

#include "pipe_pair.hpp"
#include "os/child_process.hpp"
#include "os/run_command.hpp"

using psych::host::child_process;
using namespace std::chrono_literals;

namespace {

/// Runs `script` under /bin/sh with stdout on a pipe; returns what it printed and its status.
std::pair<std::string, psych::host::exit_status> run_sh(const std::string& script, std::vector<std::string> environment = {}) {
  pipe_pair out;
  auto child = child_process::spawn(
      {.argv = {"/bin/sh", "-c", script}, .environment = std::move(environment), .descriptors = {-1, out.write, -1}});
  REQUIRE_MESSAGE(child, (child ? std::string{} : child.error().message()));
  std::string printed = out.drain();
  return {printed, child.value().reap()};
}

bool gone_within(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::kill(pid, 0) == -1 && errno == ESRCH) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

}  // namespace

TEST_CASE("child_process: the child has exactly the descriptors it is given, -1 being /dev/null") {
  // The layout's sources are moved aside first: a source that sits on another's target is not
  // clobbered. Here stdout's pipe goes to 2 and stderr's to 1.
  pipe_pair out, err;
  auto child = child_process::spawn({.argv = {"/bin/sh", "-c",
                                              "echo to-one; echo to-two >&2; readlink /proc/$$/fd/0; ls /proc/$$/fd"},
                                     .environment = {},
                                     .descriptors = {-1, err.write, out.write}});
  REQUIRE(child);
  const std::string on_err_pipe = err.drain();
  const std::string on_out_pipe = out.drain();
  CHECK(child.value().reap().code == 0);
  CHECK(on_out_pipe == "to-two\n");
  CHECK(on_err_pipe == "to-one\n/dev/null\n0\n1\n2\n");  // the shell's own descriptors: 0..2 and no other
}

TEST_CASE("child_process: the environment is built from nothing") {
  ::setenv("PSYCH_CHILD_HOST_SECRET", "hunter2", 1);
  const auto [printed, status] = run_sh("env", {"GIVEN=forty-two"});
  ::unsetenv("PSYCH_CHILD_HOST_SECRET");
  CHECK(status.code == 0);
  CHECK(printed.find("GIVEN=forty-two\n") != std::string::npos);
  CHECK(printed.find("hunter2") == std::string::npos);
  CHECK(printed.find("HOME=") == std::string::npos);
}

TEST_CASE("child_process: the exit status as a shell reports it, read without reaping and then reaped") {
  SUBCASE("an exit") {
    const auto [printed, status] = run_sh("exit 3");
    CHECK(status.code == 3);
    CHECK(status.text() == "exited with status 3");
  }
  SUBCASE("a signal") {
    const auto [printed, status] = run_sh("kill -TERM $$");
    CHECK(status.code == 128 + SIGTERM);
    CHECK(status.text() == "killed by signal 15");
  }
  SUBCASE("status_text waits at most its limit and does not reap") {
    auto child = child_process::spawn({.argv = {"/bin/sh", "-c", "sleep 0.3; exit 4"}, .descriptors = {-1, -1, -1}});
    REQUIRE(child);
    CHECK(child.value().status_text(0ms) == "still running");
    CHECK(child.value().status_text(10s) == "exited with status 4");
    CHECK(child.value().status_text(0ms) == "exited with status 4");  // still not reaped
    CHECK(child.value().reap().code == 4);
    CHECK(child.value().pid() == -1);
  }
}

TEST_CASE("child_process: its own process group, killed whole; a child still held when dropped is killed and reaped") {
  pipe_pair out;
  pid_t leader = -1, grandchild = -1;
  {
    auto child = child_process::spawn(
        {.argv = {"/bin/sh", "-c", "sleep 60 & echo $!; wait"}, .descriptors = {-1, out.write, -1}});
    REQUIRE(child);
    out.close_write();
    leader = child.value().pid();
    CHECK(::getpgid(leader) == leader);
    CHECK(::getpgid(leader) != ::getpgid(0));
    std::string line;
    char c = 0;
    while (::read(out.read, &c, 1) == 1 && c != '\n') line += c;
    grandchild = std::stoi(line);
    CHECK(::getpgid(grandchild) == leader);
  }  // dropped while running: SIGKILL to the group, then reaped
  errno = 0;
  CHECK(::waitpid(leader, nullptr, WNOHANG) == -1);
  CHECK(errno == ECHILD);
  CHECK(gone_within(leader, 1s));
  CHECK(gone_within(grandchild, 5s));  // reparented and reaped by init
}

TEST_CASE("child_process: a program that cannot be run is the call and its errno") {
  auto missing = child_process::spawn({.argv = {"/nonexistent/program"}, .descriptors = {-1, -1, -1}});
  REQUIRE_FALSE(missing);
  CHECK(missing.error().call == "posix_spawn(/nonexistent/program)");
  CHECK(missing.error().error == ENOENT);
  CHECK(missing.error().message() == "posix_spawn(/nonexistent/program): No such file or directory");
  auto unnamed = child_process::spawn({.argv = {"no-such-program-on-path"}, .search_path = true});
  REQUIRE_FALSE(unnamed);
  CHECK(unnamed.error().call == "posix_spawnp(no-such-program-on-path)");
}

TEST_CASE("child_process: released, the pid and pidfd are the caller's, reaped with reap_pidfd") {
  auto child = child_process::spawn({.argv = {"/bin/sh", "-c", "exit 7"}, .descriptors = {-1, -1, -1}});
  REQUIRE(child);
  const auto held = child.value().release();
  CHECK(child.value().pid() == -1);
  CHECK(child.value().pidfd() == -1);
  CHECK(held.pid > 0);
  CHECK(child_process::reap_pidfd(held.pid, held.pidfd).code == 7);
  ::close(held.pidfd);
}

// run_command (src/host/os/run_command.cpp): the host's own short commands, on the same Asio pipes as
// the session's (one implementation for POSIX and Windows; tests/windows_host runs it on Windows).
TEST_CASE("run_command: both streams and the status; the first MiB of each is kept") {
  auto ran = psych::host::run_command(
      {"/bin/sh", "-c", "printf out; printf err >&2; head -c 1100000 /dev/zero | tr '\\0' x; exit 3"}, {}, 20s);
  REQUIRE_MESSAGE(ran, (ran ? std::string{} : ran.error().message()));
  CHECK(ran.value().exit_code == 3);
  CHECK(ran.value().stderr_text == "err");
  CHECK(ran.value().stdout_text.size() == std::size_t{1} << 20);
  CHECK(ran.value().stdout_text.starts_with("outxxx"));
}

TEST_CASE("run_command: past its limit, the command and what holds its output are ended, and its status is -1") {
  const auto started = std::chrono::steady_clock::now();
  // The grandchild keeps stdout open after the shell is gone: the limit, not end of file, ends it.
  auto ran = psych::host::run_command({"/bin/sh", "-c", "sleep 60 & echo $!; exit 0"}, {}, 500ms);
  REQUIRE(ran);
  CHECK(ran.value().exit_code == -1);
  CHECK(std::chrono::steady_clock::now() - started < 10s);
  const auto holder = static_cast<pid_t>(std::stol(ran.value().stdout_text));
  CHECK(gone_within(holder, 5s));  // the sleeper that held stdout: killed with the group, reaped by init
  auto missing = psych::host::run_command({"/nonexistent/program"}, {}, 1s);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message().find("/nonexistent/program") != std::string::npos);
}
