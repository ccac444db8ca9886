// The session's loopback transport (docs/windows-launcher.md, "The host's side") against launchers
// that break it: stand-ins in Python that attach as told and then misbehave. The real Windows
// launcher under Wine is tests/windows_launcher/test_host_session.cpp; these need neither Wine
// nor mingw, so every host runs them.
#include <doctest/doctest.h>

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <stop_token>
#include <string>
#include <thread>

#include "os/child_process.hpp"
#include "execution/launcher_process.hpp"
#include "execution/session.hpp"
#include "temp_dir.hpp"

using namespace psych;
using namespace std::chrono_literals;

namespace {

// argv[1]: how to misbehave. It finds the host as a Windows launcher does, in its environment.
constexpr const char* stand_in = R"(
import json, os, socket, sys, time
mode = sys.argv[1]
if mode == "exits":  # before it attaches
    sys.exit(7)
if mode == "hangs":  # without attaching; its pid on stdout, which the session captures
    print(os.getpid(), flush=True)
    time.sleep(600)
def attach(stream, secret=os.environ["PSYCH_HOST_SECRET"]):
    s = socket.create_connection(("127.0.0.1", int(os.environ["PSYCH_HOST_PORT"])))
    s.sendall((json.dumps({"type": "attach", "secret": secret, "stream": stream}) + "\n").encode())
    return s
def lines(s):
    buffer = b""
    while chunk := s.recv(65536):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield json.loads(line)
if mode == "wrong-secret":
    attach("control", "0" * 32)
    time.sleep(0.5)
    sys.exit(0)
control = attach("control")
frames = lines(control)
assert next(frames)["type"] == "launch"
if mode == "no-channel":  # says it started, never attaches the channel, and answers the cancel
    control.sendall(b'{"type":"started","pid":1,"mechanisms":{}}\n')
    assert next(frames)["type"] == "cancel"
    control.sendall(b'{"type":"exit","exit_code":-1,"cancelled":true}\n')
elif mode == "channel-as-control":  # attaches the channel claiming to be control again
    attach("control")
    control.sendall(b'{"type":"started","pid":1,"mechanisms":{}}\n')
    assert next(frames)["type"] == "cancel"
    control.sendall(b'{"type":"exit","exit_code":-1,"cancelled":true}\n')
)";

/// The stand-in as the session's launcher, attaching over loopback.
class stand_in_starter final : public host::launcher_starter {
 public:
  explicit stand_in_starter(std::string mode) : mode_(std::move(mode)) {}
  result<host::launcher_process> start(const host::launcher_fds& fds, const host::execution_dirs&) override {
    REQUIRE(fds.attach);
    auto spawned = host::child_process::spawn(
        {.argv = {"/usr/bin/python3", "-I", "-c", stand_in, mode_},
         .environment = {std::string(protocol::host_port_variable) + "=" + std::to_string(fds.attach->port),
                         std::string(protocol::host_secret_variable) + "=" + fds.attach->secret},
         .descriptors = {-1, fds.stdout_write, fds.stderr_write}});
    if (!spawned) return fail_with(error_kind::launcher_unavailable, spawned.error().message());
    const auto held = spawned.value().release();
    return host::launcher_process{held.pid, held.pidfd};
  }
  [[nodiscard]] bool attaches_over_loopback() const override { return true; }

 private:
  std::string mode_;
};

struct timed_outcome {
  host::session_outcome outcome;
  double seconds = 0;
};

timed_outcome run_with(const std::string& mode, std::stop_token stop = {}) {
  const psych::testing::temp_dir root("psych-session-loopback");
  stand_in_starter starter(mode);
  host::session_plan plan;
  plan.starter = &starter;
  plan.interpreter = "python";
  plan.program = "1";
  plan.temp_root = root.path().string();
  plan.terms.limits.wall_seconds.value = 30;
  const auto began = std::chrono::steady_clock::now();
  timed_outcome out{host::run_session(plan, std::move(stop))};
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  CHECK(std::filesystem::is_empty(root.path()));  // the execution's directories went with it
  return out;
}

/// A launch that ended before the launcher attached: a failed launch that says so, nothing graded.
void check_never_attached(const host::session_outcome& outcome) {
  REQUIRE(outcome.result.failure);
  INFO(outcome.result.failure->message);
  CHECK(outcome.result.failure->kind == failure_kind::launch_failed);
  CHECK(outcome.result.failure->message.find("the launcher never attached") != std::string::npos);
  CHECK_FALSE(outcome.mechanisms);
}

}  // namespace

TEST_CASE("session over loopback: a launcher that exits before it attaches ends the wait") {
  const auto [outcome, seconds] = run_with("exits");
  check_never_attached(outcome);
  CHECK(seconds < 10);
}

TEST_CASE("session over loopback: a launcher that hangs without attaching is ended at the cancel") {
  std::stop_source stop;
  std::jthread canceller([&stop] {
    std::this_thread::sleep_for(1s);
    stop.request_stop();
  });
  const auto [outcome, seconds] = run_with("hangs", stop.get_token());
  REQUIRE(outcome.result.failure);
  INFO(outcome.result.failure->message);
  CHECK(outcome.result.cancelled);
  CHECK(seconds < 10);  // at the cancel, not at the wall clock's 30 s
  // The stand-in, told nothing, was killed and reaped: its pid names no process any more.
  const int pid = std::atoi(outcome.result.stdout_data.c_str());
  REQUIRE(pid > 0);
  CHECK(::kill(pid, 0) != 0);
}

TEST_CASE("session over loopback: a launcher that never proves the secret never gets its orders") {
  const auto [outcome, seconds] = run_with("wrong-secret");
  check_never_attached(outcome);
  CHECK(outcome.result.failure->message.find("1 dropped") != std::string::npos);
  CHECK(seconds < 10);  // at the launcher's exit, not at the wall clock's 30 s
}

TEST_CASE("session over loopback: a start without a proven channel is a violation, and the launcher is cancelled") {
  for (const char* mode : {"no-channel", "channel-as-control"}) {
    CAPTURE(mode);
    const auto [outcome, seconds] = run_with(mode);
    REQUIRE(outcome.result.failure);
    INFO(outcome.result.failure->message);
    CHECK(outcome.result.failure->kind == failure_kind::protocol_violation);
    CHECK(outcome.result.failure->message.find("without attaching the channel") != std::string::npos);
    CHECK(outcome.mechanisms);  // it got as far as started
    CHECK_FALSE(outcome.program_started);
    CHECK(seconds < 15);  // the channel's patience, not the wall clock's 30 s
  }
}
