// Two executions at once, each trying to reach the other: through /proc (its cwd, its
// environment, a signal to any pid it can see, kill(-1, SIGKILL)) and through what the other
// left in /tmp. With a uid of their own each (a root worker's range), both finish with their own
// value, having found nothing. The same programs sharing one uid at PROCESS level find each
// other: the control that shows the probe can see what it looks for.
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <set>
#include <string>
#include <thread>

#include "backends_posix.hpp"
#include "host_kernel.hpp"

using namespace psych;

using conformance::is_root;

namespace {

constexpr std::int64_t range_first = 1'500'320;
constexpr std::int64_t range_count = 4;

/// Writes `secret` into the workspace and (where it may) /tmp, then for `seconds` looks for anything of another
/// execution; returns "<its own secret, read back>|<what it found, ;-separated>".
std::string neighbour_program(const std::string& label, const std::string& secret, bool kill_all) {
  return R"PY(import os, signal, time
LABEL, SECRET, KILL_ALL = ')PY" +
         label + "', '" + secret + "', " + (kill_all ? "True" : "False") + R"PY(
open('secret.txt', 'w').write(SECRET)
try:  # refused outright where Landlock confines the program's writes to its own directories
    open('/tmp/psych-neighbour-' + LABEL, 'w').write(SECRET)
except OSError:
    pass
mine = {os.getpid(), os.getppid()}  # itself, and its launcher or (in a pid namespace) its init
found = []
def note(what):
    if what not in found:
        found.append(what)
deadline = time.monotonic() + 3
while time.monotonic() < deadline:
    for name in os.listdir('/proc'):
        if not name.isdigit() or int(name) in mine:
            continue
        pid = int(name)
        try:
            note('cwd of %d: %s' % (pid, os.readlink('/proc/%d/cwd' % pid)))
            note('their secret: ' + open('/proc/%d/cwd/secret.txt' % pid).read())
        except OSError:
            pass
        try:
            open('/proc/%d/environ' % pid, 'rb').read()
            note('environ of %d' % pid)
        except OSError:
            pass
        try:
            os.kill(pid, 0)
            note('may signal %d' % pid)
        except OSError:
            pass
    try:
        shared_tmp = os.listdir('/tmp')
    except OSError:  # Landlock: the host's /tmp is not the program's to look into
        shared_tmp = []
    for name in shared_tmp:
        if name.startswith('psych-neighbour-') and name != 'psych-neighbour-' + LABEL:
            try:
                note('their /tmp: ' + open('/tmp/' + name).read())
            except OSError:
                pass
    if KILL_ALL:
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.05)
return open('secret.txt').read() + '|' + ';'.join(found)
)PY";
}

struct pair_outcome {
  sandbox_result a, b;
  bool overlapped = false;  ///< both interpreters were seen alive at the same moment
};

/// Runs the two programs at once on `sb`; `uids`: where their processes are looked for.
pair_outcome run_pair(sandbox& sb, const std::set<std::int64_t>& uids, bool kill_all) {
  pair_outcome out;
  auto a = std::async(std::launch::async,
                      [&] { return conformance::run(sb, neighbour_program("a", "alpha-4417", kill_all)); });
  auto b = std::async(std::launch::async,
                      [&] { return conformance::run(sb, neighbour_program("b", "bravo-9023", kill_all)); });
  const auto done = [](auto& f) { return f.wait_for(std::chrono::milliseconds(0)) == std::future_status::ready; };
  while (!done(a) || !done(b)) {
    std::set<std::int64_t> alive_uids;
    std::size_t alive = 0;
    for (const auto uid : uids) {
      const auto processes = conformance::processes_of(uid);
      if (!processes.empty()) alive_uids.insert(uid);
      alive += processes.size();
    }
    // Two uids alive, or (one shared uid) two interpreters of it.
    if (alive_uids.size() >= 2 || (uids.size() == 1 && alive >= 2)) out.overlapped = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  out.a = a.get();
  out.b = b.get();
  return out;
}

std::string text_of(const sandbox_result& r) {
  return r.value ? r.value->text : (r.failure ? "failure: " + r.failure->message : "no value");
}

}  // namespace

TEST_CASE("two concurrent executions, each with a uid of its own, cannot find, read or signal each other" *
          doctest::skip(!is_root())) {
  for (const auto& backend : conformance::backends()) {
    SUBCASE(backend.name.c_str()) {
      auto sandbox = conformance::make_sandbox(conformance::with_uid_range(backend, range_first, range_count));
      REQUIRE_MESSAGE(sandbox, (sandbox ? "" : sandbox.error().message()));
      std::set<std::int64_t> range;
      for (std::int64_t uid = range_first; uid < range_first + range_count; ++uid) range.insert(uid);

      const auto out = run_pair(*sandbox.value(), range, true);
      CHECK(out.overlapped);
      CHECK_MESSAGE(text_of(out.a) == R"("alpha-4417|")", text_of(out.a));
      CHECK_MESSAGE(text_of(out.b) == R"("bravo-9023|")", text_of(out.b));
      // A pool holds a uid of the range for the sandbox it keeps waiting (docs/pools.md); its
      // leftovers are checked at the end, with the pool gone.
      if (conformance::pooled(backend)) continue;
      for (const auto uid : range) {
        CHECK(conformance::processes_of(uid).empty());
        CHECK_MESSAGE(conformance::host_leftovers_of(uid).empty(), conformance::joined(conformance::host_leftovers_of(uid)));
      }
      const auto d = sandbox.value()->describe();
      REQUIRE(d.run_as);
      CHECK(d.run_as->free == range_count);
    }
  }
}

TEST_CASE("the control: sharing one uid at PROCESS level, only Landlock keeps the same programs apart" *
          doctest::skip(!is_root())) {
  const auto& backend = conformance::backends().front();  // linux-process, the suite's one uid
  REQUIRE(backend.name == "linux-process");
  auto sandbox = local_sandbox(backend.options);
  REQUIRE_MESSAGE(sandbox, (sandbox ? "" : sandbox.error().message()));
  const auto out = run_pair(*sandbox.value(), {conformance::suite_uid}, false);
  REQUIRE(out.overlapped);
  INFO(text_of(out.a));
  INFO(text_of(out.b));
  const int abi = conformance::host_landlock_abi();
  if (abi == 0) {
    // Without Landlock nothing but the uid stands between them: /proc shows where the other works
    // and what it holds, and a shared uid may signal it. This is what the probe looks for, so the
    // main case's empty findings mean something.
    CHECK(text_of(out.a).find("cwd of") != std::string::npos);
    CHECK(text_of(out.a).find("environ of") != std::string::npos);
    CHECK(text_of(out.a).find("their secret: bravo-9023") != std::string::npos);
    CHECK(text_of(out.b).find("their secret: alpha-4417") != std::string::npos);
    CHECK(text_of(out.a).find("may signal") != std::string::npos);
  } else {
    // With Landlock each execution is its own domain: /proc/<pid>/cwd and environ of a process
    // outside it fail the ptrace check, its files are outside the ruleset, and from ABI 6 on
    // signals are scoped. Even a shared uid then finds nothing of the other.
    CHECK(text_of(out.a).find("their secret") == std::string::npos);
    CHECK(text_of(out.b).find("their secret") == std::string::npos);
    CHECK(text_of(out.a).find("cwd of") == std::string::npos);
    if (abi >= 6) CHECK(text_of(out.a).find("may signal") == std::string::npos);
  }
  conformance::remove_host_leftovers_of(conformance::suite_uid);
}
