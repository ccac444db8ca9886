// A launcher that lies about what it made: only what the child observed may grade an execution.
// POSIX only: the liar is a Python script standing in for the Linux launcher, run as the suite's uid.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "backends_posix.hpp"

using namespace psych;

namespace {

/// A launcher that lies once a file beside it says so (<itself>.lie): it runs the real launcher
/// at isolation=process and rewrites `started` to claim every namespace and a minimal root.
/// Until then it passes everything through, so that local_sandbox()'s own probe finds a ready
/// backend: a launcher that turns liar after the health check. Whatever a launcher says, only
/// what the child observed may grade the execution.
constexpr const char* lying_launcher = R"PY(#!/usr/bin/python3 -I
import json, os, select, socket
REAL = {REAL!r}
LIE = os.path.exists(__file__ + ".lie")
control = socket.socket(fileno=3)
pending = b""
while b"\n" not in pending:
    chunk = control.recv(1 << 16)
    if not chunk:
        raise SystemExit(1)
    pending += chunk
line, pending = pending.split(b"\n", 1)
launch = json.loads(line)
if LIE:
    launch["isolation"] = "process"
ours, theirs = socket.socketpair()
pid = os.fork()
if pid == 0:
    os.dup2(theirs.fileno(), 3)
    os.execv(REAL, [REAL])
theirs.close()
ours.sendall(json.dumps(launch).encode() + b"\n" + pending)
from_real = b""
while True:
    ready, _, _ = select.select([ours, control], [], [])
    if control in ready:
        data = control.recv(1 << 16)
        if not data:
            break
        ours.sendall(data)
    if ours in ready:
        data = ours.recv(1 << 16)
        if not data:
            break
        from_real += data
        while b"\n" in from_real:
            frame, from_real = from_real.split(b"\n", 1)
            message = json.loads(frame)
            if LIE and message.get("type") == "started":
                message["mechanisms"]["namespaces"] = ["user", "mount", "pid", "net", "ipc", "uts", "cgroup"]
                message["mechanisms"]["root_entries"] = ["dev", "proc", "tmp", "usr", "workspace"]
                frame = json.dumps(message).encode()
            control.sendall(frame + b"\n")
os.waitpid(pid, 0)
)PY";

}  // namespace

TEST_CASE("a launcher that claims namespaces it did not make: graded down, aborted, nothing runs") {
  if (::geteuid() != 0) {
    psych::testing::skip_case("the real launcher behind the liar drops to a run_as uid, which needs root");
    return;
  }
  const std::string real_launcher = PSYCH_LAUNCHER_PATH;
  const std::string script_path = conformance::temp_root() + "/lying-launcher";
  {
    std::string text = lying_launcher;
    text.replace(text.find("{REAL!r}"), 8, "'" + real_launcher + "'");
    std::FILE* file = std::fopen(script_path.c_str(), "w");
    REQUIRE(file != nullptr);
    std::fputs(text.c_str(), file);
    std::fclose(file);
    ::chmod(script_path.c_str(), 0755);
  }
  psych::local_sandbox_options options;
  options.isolation = isolation_level::isolated;
  options.backend = "linux-namespaces";
  options.launcher_path = script_path;
  options.run_as_uid = options.run_as_gid = conformance::suite_uid;
  options.temp_root = conformance::temp_root();
  auto sandbox = psych::local_sandbox(options);
  if (!sandbox) {
    std::filesystem::remove(script_path);
    psych::testing::skip_case("linux-isolated is not available here: " + sandbox.error().message());
    return;
  }
  // From here on it lies: a fresh local_sandbox() sees it in its probe and hands nothing back;
  // the one built before it turned is caught by the child's own report at run().
  const std::string lie = script_path + ".lie";
  std::FILE* lie_file = std::fopen(lie.c_str(), "w");
  REQUIRE(lie_file != nullptr);
  std::fclose(lie_file);
  auto after_turning = psych::local_sandbox(options);
  CHECK_FALSE(after_turning);
  if (!after_turning) {
    CHECK(after_turning.error().kind == error_kind::sandbox_setup);
    CHECK(after_turning.error().message().find("not ready") != std::string::npos);
  }
  const std::string marker = conformance::temp_root() + "/the-program-ran";
  // The marker directory is the suite's own temp root: world-traversable, but the program may
  // only try; the proof that it never ran is its empty stdout and the abort.
  const auto r = sandbox.value()->run(
      {.program = "print('ran')\nopen('" + marker + "', 'w').write('ran')\nreturn 1",
       .terms = conformance::terms_for(*sandbox.value(), {}, isolation_level::isolated)});
  REQUIRE(r.failure);
  INFO(r.failure->message);
  CHECK(r.failure->kind == failure_kind::isolation_unavailable);
  CHECK(r.failure->message.find("observed the host's own") != std::string::npos);
  CHECK(r.stdout_size == 0);
  CHECK_FALSE(std::filesystem::exists(marker));
  CHECK(r.guarantees.filesystem != enforcement::enforced);
  std::filesystem::remove(script_path);
  std::filesystem::remove(lie);
}
