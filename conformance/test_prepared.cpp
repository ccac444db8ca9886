// Prepared sandboxes (docs/pools.md), beyond what every case checks on linux-isolated-prepared:
// the claim's limits are the ones the child observes, a sandbox is used once, one unclaimed past
// its maximum age is replaced, a pool that cannot prepare says so and the request is built on
// request (and fails as it would there), and at PROCESS a shared uid turns the pool off.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "backends_posix.hpp"

using namespace psych;
namespace fs = std::filesystem;

namespace {

/// linux-isolated-prepared's options, with `change` applied.
local_sandbox_options pooled_options(const std::function<void(local_sandbox_options&)>& change = {}) {
  for (const auto& backend : conformance::backends())
    if (conformance::pooled(backend)) {
      auto options = backend.options;
      if (change) change(options);
      return options;
    }
  FAIL("no pooled backend in conformance::backends()");
  return {};
}

/// The pool's line of describe(), "prepared: N of M sandboxes waiting …".
std::string pool_line(sandbox& sb) {
  for (const auto& line : sb.describe().mechanisms)
    if (line.starts_with("prepared: ")) return line;
  return {};
}

/// Waits (at most 10 s) until describe() says `waiting` sandboxes are prepared.
bool wait_prepared(sandbox& sb, std::size_t size, std::size_t waiting = 1) {
  const auto wanted = fmt::format("prepared: {} of {} ", waiting, size);
  for (int i = 0; i < 100; ++i) {
    if (pool_line(sb).starts_with(wanted)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

std::unique_ptr<sandbox> made(result<std::unique_ptr<sandbox>> sandbox) {
  REQUIRE_MESSAGE(sandbox, (sandbox ? "" : sandbox.error().message()));
  return std::move(sandbox).value();
}

}  // namespace

TEST_CASE("prepared: a claimed sandbox holds the request's limits, as its child observed them") {
  auto sb = made(local_sandbox(pooled_options()));
  REQUIRE_MESSAGE(wait_prepared(*sb, 1), pool_line(*sb));
  const auto r = conformance::run(*sb, R"PY(
import resource
def read(path):
    try:
        return open(path).read().strip()
    except OSError:
        return None
return {"as": resource.getrlimit(resource.RLIMIT_AS)[0], "nproc": resource.getrlimit(resource.RLIMIT_NPROC)[0],
        "cpu": resource.getrlimit(resource.RLIMIT_CPU), "fsize": resource.getrlimit(resource.RLIMIT_FSIZE)[0],
        "memory": read("/sys/fs/cgroup/memory.max") or read("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
        "pids": read("/sys/fs/cgroup/pids.max") or read("/sys/fs/cgroup/pids/pids.max")}
)PY",
                                  {.cpu_seconds = 3.0, .memory_bytes = 96u << 20, .file_size_bytes = 1u << 20,
                                   .process_count = 12, .wall_seconds = 7.0});
  REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : "no value"));
  const auto value = r.value->text;
  CHECK_MESSAGE(value.find(R"("as":100663296)") != std::string::npos, value);
  CHECK_MESSAGE(value.find(R"("cpu":[3,4])") != std::string::npos, value);
  CHECK_MESSAGE(value.find(R"("fsize":1048576)") != std::string::npos, value);
  // RLIMIT_NPROC: the grant, plus what the uid already ran when the sandbox was launched.
  CHECK_MESSAGE(value.find(R"("nproc":13)") != std::string::npos, value);  // ISOLATED: its init
  if (r.guarantees.memory == enforcement::enforced) {
    CHECK_MESSAGE(value.find(R"("memory":"100663296")") != std::string::npos, value);
    CHECK_MESSAGE(value.find(R"("pids":"13")") != std::string::npos, value);  // the sandbox's init counts
  }
  CHECK(r.isolation == isolation_level::isolated);
  CHECK_MESSAGE(pool_line(*sb).find("claimed 1,") != std::string::npos, pool_line(*sb));
}

TEST_CASE("prepared: each sandbox serves one execution; the next finds nothing of it") {
  auto sb = made(local_sandbox(pooled_options()));
  const auto program = R"PY(
import os
found = sorted(os.listdir("."))
open("left-by-an-earlier-execution", "w").write("x")
return {"found": found, "pid_ns": os.readlink("/proc/self/ns/pid")}
)PY";
  std::string namespaces;
  for (int i = 0; i < 2; ++i) {
    REQUIRE_MESSAGE(wait_prepared(*sb, 1), pool_line(*sb));
    const auto r = conformance::run(*sb, program);
    REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : "no value"));
    CHECK_MESSAGE(r.value->text.find(R"("found":[])") != std::string::npos, r.value->text);
    const auto ns = r.value->text.substr(r.value->text.find("pid_ns"));
    CHECK_MESSAGE(ns != namespaces, ns);
    namespaces = ns;
  }
  CHECK_MESSAGE(pool_line(*sb).find("claimed 2,") != std::string::npos, pool_line(*sb));
}

TEST_CASE("prepared: one unclaimed past its maximum age is retired and replaced") {
  auto sb = made(local_sandbox(pooled_options([](auto& o) { o.pool.max_age_seconds = 0.3; })));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  REQUIRE_MESSAGE(wait_prepared(*sb, 1), pool_line(*sb));
  const auto line = pool_line(*sb);
  const auto retired = line.find("retired ");
  REQUIRE(retired != std::string::npos);
  CHECK_MESSAGE(std::stoi(line.substr(retired + 8)) >= 2, line);
  const auto r = conformance::run(*sb, "return 7");
  REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : "no value"));
  CHECK(r.value->text == "7");
}

TEST_CASE("prepared: a pool that cannot prepare says so, and a request is built on request") {
  // An interpreter that disappears once the sandbox was built: the waiting one still runs (it
  // is exec'd already), every later preparation fails, and so does the on-request path. Outside
  // /tmp, which an ISOLATED sandbox replaces with its own: the copy's directory is bound into the
  // sandbox's root as its prefix (and the interpreter finds its library under /usr, as built).
  struct removed_at_end {
    fs::path path;
    ~removed_at_end() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } dir{fs::path("/var/tmp") / fmt::format("psych-conformance-python-{}", ::getpid())};
  fs::create_directories(dir.path / "bin");
  for (const auto& each : {dir.path, dir.path / "bin"}) ::chmod(each.c_str(), 0755);
  const auto python = made(local_sandbox({}))->describe().interpreter;
  const auto copy = dir.path / "bin" / "python3";
  fs::copy_file(python, copy, fs::copy_options::overwrite_existing);
  auto sb = made(local_sandbox(pooled_options([&](auto& o) { o.python_bin = copy.string(); })));
  REQUIRE_MESSAGE(wait_prepared(*sb, 1), pool_line(*sb));
  fs::remove(copy);
  const auto claimed = conformance::run(*sb, "return 1");
  REQUIRE_MESSAGE(claimed.ok(), (claimed.failure ? claimed.failure->message : "no value"));
  std::string problem;
  for (int i = 0; i < 50 && problem.empty(); ++i) {
    for (const auto& p : sb->describe().problems)
      if (p.starts_with("prepared: the pool cannot prepare")) problem = p;
    if (problem.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK_MESSAGE(!problem.empty(), "describe() never said the pool cannot prepare");
  const auto cold = conformance::run(*sb, "return 1");
  CHECK(!cold.ok());
  REQUIRE(cold.failure);
  CHECK(cold.failure->kind == failure_kind::launch_failed);
  CHECK_MESSAGE(pool_line(*sb).find("built on request 1,") != std::string::npos, pool_line(*sb));
}

TEST_CASE("prepared: at isolation=process one shared uid turns the pool off, and describe() says why") {
  int checked = 0;
  for (const auto& backend : conformance::backends()) {
    if (backend.name != "linux-process" || !backend.options.run_as_uid) continue;
    auto options = backend.options;
    options.pool.size = 2;
    auto sb = made(local_sandbox(options));
    const auto d = sb->describe();
    CHECK(pool_line(*sb).empty());
    bool said = false;
    for (const auto& p : d.problems) said = said || p.starts_with("prepared: off: at isolation=process");
    CHECK(said);
    const auto r = conformance::run(*sb, "return 2");
    CHECK(r.ok());
    ++checked;
  }
  CHECK_MESSAGE(checked == 1, "the suite has no linux-process backend with one run_as_uid to check");
}
