// One program per execution, no state between executions, failures and
// values as data.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "backends.hpp"

using namespace psych;
using conformance::for_each_backend;

TEST_CASE("the workspace is fresh and empty every time, and nothing carries over") {
  for_each_backend([](sandbox& sb, const auto&) {
    const char* leave_state = R"(
import os
before = sorted(os.listdir("."))
with open("state.txt", "w") as f:
    f.write("left behind")
import builtins
builtins.psych_leftover = 1
return {"before": before, "cwd_is_home": os.getcwd() == os.environ["HOME"], "tmp": sorted(os.listdir(os.environ["TMPDIR"]))}
)";
    const auto first = conformance::run(sb, leave_state);
    REQUIRE_MESSAGE(first.ok(), first.failure->message);
    CHECK(first.value->text == R"({"before":[],"cwd_is_home":true,"tmp":[]})");
    const auto second = conformance::run(sb, R"(
import os, builtins
return {"files": sorted(os.listdir(".")), "leftover": hasattr(builtins, "psych_leftover")}
)");
    REQUIRE(second.ok());
    CHECK(second.value->text == R"({"files":[],"leftover":false})");
  });
}

TEST_CASE("a credential in the host's environment never reaches the child") {
  ::setenv("PSYCH_CONFORMANCE_SECRET_TOKEN", "hunter2-credential", 1);
  for_each_backend([](sandbox& sb, const auto&) {
    const auto r = conformance::run(sb, "import os\nreturn sorted(os.environ.items())");
    REQUIRE(r.ok());
    CHECK(r.value->text.find("PSYCH_CONFORMANCE_SECRET_TOKEN") == std::string::npos);
    CHECK(r.value->text.find("hunter2") == std::string::npos);
    CHECK(r.guarantees.environment == enforcement::enforced);
  });
  SUBCASE("an allowlisted variable does reach it") {
    auto options = conformance::backends().front().options;
    options.env_allowlist = {"PSYCH_CONFORMANCE_SECRET_TOKEN"};
    auto sb = local_sandbox(options);
    if (!sb) {
      psych::testing::skip_case("linux-process is not available here: " + sb.error().message());
    } else {
      const auto r = conformance::run(*sb.value(), "import os\nreturn os.environ.get('PSYCH_CONFORMANCE_SECRET_TOKEN')");
      CHECK(r.value->text == R"("hunter2-credential")");
    }
  }
  ::unsetenv("PSYCH_CONFORMANCE_SECRET_TOKEN");
}

TEST_CASE("a traceback comes back as data, with the program's own line numbers") {
  for_each_backend([](sandbox& sb, const auto&) {
    const auto r = conformance::run(sb, "x = 1\nprint('before')\ndef f():\n    return {}['missing']\nf()\n");
    REQUIRE(r.failure);
    CHECK(r.failure->kind == failure_kind::exception);
    CHECK(r.failure->message.find("KeyError") != std::string::npos);
    CHECK(r.failure->line == 4);
    CHECK(r.failure->traceback.find("line 5") != std::string::npos);
    CHECK(r.failure->traceback.find("line 4") != std::string::npos);
    CHECK(r.failure->traceback.find("<program>") != std::string::npos);
    CHECK(r.failure->traceback.find("bootstrap") == std::string::npos);
    CHECK(r.stdout_data == "before\n");
    CHECK_FALSE(r.limit_hit);
  });
}

TEST_CASE("a SyntaxError comes back as data with its line") {
  for_each_backend([](sandbox& sb, const auto&) {
    const auto r = conformance::run(sb, "a = 1\nb = (2,\nprint('never')\nreturn a +\n");
    REQUIRE(r.failure);
    CHECK(r.failure->kind == failure_kind::syntax_error);
    CHECK(r.failure->line >= 2);
    CHECK(r.stdout_size == 0);
  });
}

TEST_CASE("values round-trip: nested JSON, unicode, big integers; None is no value") {
  for_each_backend([](sandbox& sb, const auto&) {
    SUBCASE("nested") {
      const auto r = conformance::run(sb, R"(return {"a": [1, 2.5, None, True, {"b": "c"}], "n": -7})");
      REQUIRE(r.ok());
      CHECK(r.value->text == R"({"a":[1,2.5,null,true,{"b":"c"}],"n":-7})");
    }
    SUBCASE("unicode") {
      const auto r = conformance::run(sb, "'héllo wörld ✓ 😀'");
      REQUIRE(r.ok());
      CHECK(r.value->text == "\"héllo wörld ✓ 😀\"");
    }
    SUBCASE("big integers survive exactly") {
      const auto r = conformance::run(sb, "return [2**200, -(10**40)]");
      REQUIRE(r.ok());
      CHECK(r.value->text ==
            "[1606938044258990275541962092341162602522202993782792835301376,-10000000000000000000000000000000000000000]");
    }
    SUBCASE("top-level await") {
      const auto r = conformance::run(sb, "import asyncio\nawait asyncio.sleep(0)\nreturn 'awaited'");
      REQUIRE(r.ok());
      CHECK(r.value->text == "\"awaited\"");
    }
    SUBCASE("None and no value at all are both no value") {
      const auto none = conformance::run(sb, "return None");
      const auto nothing = conformance::run(sb, "x = 1");
      CHECK(none.ok());
      CHECK(nothing.ok());
      CHECK_FALSE(none.value);
      CHECK_FALSE(nothing.value);
    }
    SUBCASE("a value JSON cannot carry is a clear failure") {
      const auto r = conformance::run(sb, "return {1, 2}");
      REQUIRE(r.failure);
      CHECK(r.failure->kind == failure_kind::value_not_serializable);
      CHECK(r.failure->message.find("set") != std::string::npos);
    }
  });
}

TEST_CASE("a program asking for more isolation than the backend reached is never run") {
  for_each_backend([](sandbox& sb, const auto& backend) {
    if (backend.options.isolation == isolation_level::isolated) return;  // it does reach isolated
    // A sticky world-writable directory the child could write to if it ran
    // (owned by root, so the host's sweep of the child's /tmp entries leaves it).
    const std::string markers = "/tmp/psych-conformance-markers-" + std::to_string(::getpid());
    std::filesystem::create_directory(markers);
    ::chmod(markers.c_str(), 01777);
    const std::string marker = markers + "/ran";
    auto terms = conformance::terms_for(sb);
    terms.isolation = isolation_level::isolated;  // as a caller that skipped intersect_terms would
    const auto r = sb.run({.program = "open('" + marker + "', 'w').write('ran')\nprint('ran')", .terms = terms});
    REQUIRE(r.failure);
    CHECK(r.failure->kind == failure_kind::isolation_unavailable);
    CHECK(r.stdout_size == 0);
    CHECK_FALSE(std::filesystem::exists(marker));
    CHECK(r.isolation == isolation_level::process);
    std::filesystem::remove_all(markers);
  });
}

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
