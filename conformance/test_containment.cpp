// What the child observes is what gets graded: the canary, the network
// probes, the identity. Hostile programs try the same things directly.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

#include "backends_posix.hpp"
#include "host_kernel.hpp"

using namespace psych;
using conformance::for_each_backend;

TEST_CASE("the host canary is graded honestly") {
  for_each_backend([](sandbox& sb, const auto& backend) {
    const auto r = conformance::run(sb, "return 1");
    REQUIRE(r.ok());
    if (conformance::isolated(backend)) {
      // A mount namespace pivoted into the minimal root: the canary is not in the child's world,
      // whatever its uid (an unprivileged worker's own, mapped, included). A real boundary.
      CHECK(r.guarantees.filesystem == enforcement::enforced);
    } else if (conformance::host_landlock_abi() > 0) {
      // Landlock keeps the canary out of reach whatever the uid, but it is not a mount
      // boundary: the canary rule says unverified, never enforced.
      CHECK(r.guarantees.filesystem == enforcement::unverified);
    } else if (::geteuid() != 0) {
      // Same uid: the child can read the worker's files, and the grade says so.
      CHECK(r.guarantees.filesystem == enforcement::unavailable);
      CHECK(std::find(r.problems.begin(), r.problems.end(), "filesystem: the child read the host canary file") !=
            r.problems.end());
    } else {
      // An unreadable canary without a boundary is file permissions, not containment.
      CHECK(r.guarantees.filesystem == enforcement::unavailable);
    }
  });
}

TEST_CASE("a network attempt is denied, and graded from the child's own answer") {
  for_each_backend([](sandbox& sb, const auto&) {
    const auto r = conformance::run(sb, R"(
import socket
outcomes = {}
for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    try:
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(0.5)
        s.connect((host, 9))
        outcomes[host] = "connected"
    except OSError as e:
        outcomes[host] = type(e).__name__
return outcomes
)");
    REQUIRE(r.ok());
    CHECK(r.value->text.find("connected") == std::string::npos);
    CHECK(r.value->text.find("PermissionError") != std::string::npos);
    CHECK(r.network_denied);
    CHECK(r.guarantees.network == enforcement::enforced);
  });
}

TEST_CASE("the child runs as a lesser identity and cannot read root's files") {
  if (::geteuid() != 0) {
    psych::testing::skip_case(
        "the identity drop needs a root worker; the unprivileged path is covered by the CLI cases");
    return;
  }
  for_each_backend([](sandbox& sb, const auto& backend) {
    const auto r = conformance::run(sb, R"(
import os, errno
try:
    open("/etc/shadow").read()
    shadow = "readable"
except OSError as error:
    shadow = errno.errorcode[error.errno]
return {"uid": os.getuid(), "euid": os.geteuid(), "groups": os.getgroups(), "shadow": shadow,
        "uid_map": " ".join(open("/proc/self/uid_map").read().split())}
)");
    REQUIRE_MESSAGE(r.ok(), r.failure->message);
    // PROCESS: the dedicated uid itself, and root's file is refused. ISOLATED: the namespace's
    // root, mapped to the dedicated uid and nothing else, and there is no /etc/shadow at all.
    // A container: the dedicated uid of the host (--user; its gid the one group), no user
    // namespace, and the image's root, whose /etc/shadow (if it has one) is root's.
    if (backend.container)
      CHECK_MESSAGE((r.value->text ==
                         R"({"uid":1500100,"euid":1500100,"groups":[1500100],"shadow":"ENOENT","uid_map":"0 0 4294967295"})" ||
                     r.value->text ==
                         R"({"uid":1500100,"euid":1500100,"groups":[1500100],"shadow":"EACCES","uid_map":"0 0 4294967295"})"),
                    r.value->text);
    else if (conformance::isolated(backend))
      CHECK(r.value->text ==
            R"({"uid":0,"euid":0,"groups":[],"shadow":"ENOENT","uid_map":"0 1500100 1"})");
    else
      CHECK(r.value->text ==
            R"({"uid":1500100,"euid":1500100,"groups":[],"shadow":"EACCES","uid_map":"0 0 4294967295"})");
    CHECK(r.guarantees.identity == enforcement::enforced);
    CHECK(r.guarantees.process_count == enforcement::enforced);
  });
}

TEST_CASE("hostile programs: privilege and escape attempts at the PROCESS floor") {
  for_each_backend([](sandbox& sb, const auto&) {
    const auto r = conformance::run(sb, R"(
import ctypes, os, errno
libc = ctypes.CDLL(None, use_errno=True)
def attempt(fn, *args):
    rc = fn(*args)
    return "ok" if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
results = {
    "unshare_user": attempt(libc.unshare, 0x10000000),
    "ptrace_parent": attempt(libc.ptrace, 16, os.getppid(), None, None),
    "mount": attempt(libc.mount, b"none", b"/tmp", b"tmpfs", 0, None),
    "setuid_root": attempt(libc.setuid, 0) if os.getuid() != 0 else "already the namespace's powerless root",
    "setuid_other": attempt(libc.setuid, 1),
    "kill_parent": attempt(libc.kill, os.getppid(), 0),
}
return results
)");
    REQUIRE_MESSAGE(r.ok(), r.failure->message);
    const auto& v = r.value->text;
    CHECK(v.find("\"unshare_user\":\"ok\"") == std::string::npos);
    CHECK(v.find("\"ptrace_parent\":\"ok\"") == std::string::npos);
    CHECK(v.find("\"mount\":\"ok\"") == std::string::npos);
    CHECK(v.find("\"setuid_root\":\"ok\"") == std::string::npos);
    CHECK(v.find("\"setuid_other\":\"ok\"") == std::string::npos);
    if (::geteuid() == 0) CHECK(v.find("\"kill_parent\":\"ok\"") == std::string::npos);
  });
}

TEST_CASE("endless printing stays bounded in host memory") {
  for_each_backend([](sandbox& sb, const auto&) {
    rusage before{};
    ::getrusage(RUSAGE_SELF, &before);
    auto terms = conformance::terms_for(sb);
    terms.output.max_bytes = 1 << 20;
    const auto r = sb.run({.program = R"(
import sys
line = "x" * 1023 + "\n"
block = line * 1024
for _ in range(300):
    sys.stdout.write(block)
sys.stderr.write("done\n")
return "printed"
)",
                           .terms = terms});
    rusage after{};
    ::getrusage(RUSAGE_SELF, &after);
    REQUIRE(r.ok());
    CHECK(r.stdout_size == std::uint64_t{300} << 20);
    CHECK(r.stdout_data.size() == std::size_t{1} << 20);
    CHECK(r.stderr_data == "done\n");
    CHECK(r.stdout_preview.size() <= terms.output.preview_bytes + 200);
    CHECK(r.stdout_preview.find("never captured") != std::string::npos);
    // Peak RSS (KiB) may grow by the capture and buffers, never by the 300 MiB printed.
    CHECK(after.ru_maxrss - before.ru_maxrss < 64 * 1024);
  });
}
