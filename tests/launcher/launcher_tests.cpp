// psych-launch-linux end to end, driven by the blocking test host. One
// TEST_CASE per rule of the launcher contract (docs/contract.md).
#include <doctest/doctest.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <csignal>

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "test_host.hpp"

using namespace psych;
using namespace psych::testing;

namespace {

/// Sends the default launch and reads `started` and the child's hello: the interpreter is up
/// and waiting for `run`. Returns its pid.
pid_t start_until_hello(launcher& process, const scratch& dir) {
  process.send(default_launch(dir));
  const auto line = process.control_line();
  REQUIRE(line);
  auto frame = protocol::decode_frame<protocol::started_frame>(*line);
  REQUIRE(frame);
  const auto child = static_cast<pid_t>(std::get<protocol::started_frame>(frame.value()).pid);
  REQUIRE(process.channel_line());
  return child;
}


/// A loopback TCP listener: what the child's network probe tries to reach.
struct listener {
  explicit listener(int family) {
    fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    sockaddr_storage address{};
    socklen_t size = 0;
    if (family == AF_INET) {
      auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
      v4->sin_family = AF_INET;
      v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      size = sizeof *v4;
    } else {
      auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
      v6->sin6_family = AF_INET6;
      v6->sin6_addr = in6addr_loopback;
      size = sizeof *v6;
    }
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), size) != 0 || ::listen(fd, 4) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
      ::close(fd);
      fd = -1;
      return;
    }
    port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&address)->sin_port
                                   : reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  }
  ~listener() {
    if (fd >= 0) ::close(fd);
  }
  int fd = -1;
  int port = 0;
};

std::vector<std::int64_t> pair_of(const rapidjson::Value& value) {
  std::vector<std::int64_t> numbers;
  for (const auto& item : value.GetArray()) numbers.push_back(item.GetInt64());
  return numbers;
}

/// The program's returned value, from a successful `done`.
rapidjson::Document returned(const execution& outcome) {
  REQUIRE(outcome.done);
  auto done = parse_json(*outcome.done);
  REQUIRE_MESSAGE(done["ok"].GetBool(), *outcome.done, "\nstderr: ", outcome.stderr_text);
  rapidjson::Document value;
  value.CopyFrom(done["value"], value.GetAllocator());
  return value;
}

void require_clean_exit(const execution& outcome) {
  REQUIRE(outcome.exit);
  CHECK(outcome.exit->exit_code == 0);
  CHECK_FALSE(outcome.exit->signal);
  CHECK_FALSE(outcome.exit->limit_hit);
  CHECK_FALSE(outcome.exit->cancelled);
  CHECK(outcome.exit->survivors == 0);
  CHECK(outcome.launcher_status == 0);
}

}  // namespace

TEST_CASE("a launch reports what it applied, and the child observes exactly that") {
  if (!have_root()) return;
  scratch dir;
  auto launch = default_launch(dir);
  listener v4{AF_INET}, v6{AF_INET6};
  launch.probe = {v4.port, v6.port};
  const auto outcome = run_program(launch, R"(
import os
environ = open('/proc/self/environ', 'rb').read().split(b'\0')
return {"environ": sorted(e.split(b'=', 1)[0].decode() for e in environ if e),
        "fds": sorted(int(fd) for fd in os.listdir('/proc/self/fd')),
        "stdin": os.readlink('/proc/self/fd/0')}
)");
  REQUIRE_MESSAGE(outcome.started, (outcome.error ? outcome.error->message : "no reply"));
  require_clean_exit(outcome);

  SUBCASE("started: the mechanisms the launcher applied") {
    const auto& applied = outcome.started->mechanisms;
    CHECK(outcome.started->pid > 0);
    CHECK(applied.session);
    CHECK(applied.subreaper);
    CHECK(applied.no_new_privs);
    CHECK(applied.seccomp == seccomp_state::filter);
    CHECK(applied.uid_drop);
    CHECK(applied.fds_closed);
    CHECK(applied.environment_built);
    // Landlock confines the PROCESS level's filesystem wherever the kernel offers it.
    CHECK(applied.landlock_abi == launcher_landlock_abi());
    CHECK(applied.namespaces.empty());
    CHECK(applied.cgroup == "none");
    CHECK(applied.rlimits.cpu_seconds == 5);
    CHECK(applied.rlimits.address_space_bytes == 512 << 20);
    CHECK(applied.rlimits.file_size_bytes == 10 << 20);
    CHECK(applied.rlimits.open_files == 256);
    CHECK(applied.rlimits.core_bytes == 0);
    CHECK(applied.process_count_base >= 0);
    CHECK(applied.rlimits.process_count == 64 + applied.process_count_base);
  }

  SUBCASE("hello: identity, session, NoNewPrivs, seccomp, rlimits, canary, network") {
    REQUIRE(outcome.hello);
    const auto hello = parse_json(*outcome.hello);
    REQUIRE(hello.IsObject());
    CHECK(std::string(hello["token"].GetString()) == launch.token);
    const auto& report = hello["report"];
    CHECK(report["pid"].GetInt64() == outcome.started->pid);
    CHECK(report["sid"].GetInt64() == outcome.started->pid);  // setsid(): its own session
    CHECK(report["pgid"].GetInt64() == outcome.started->pid);
    for (const char* id : {"uid", "euid", "gid", "egid"}) CHECK(report[id].GetInt64() == test_uid);
    CHECK(report["groups"].GetArray().Size() == 0);
    CHECK(report["no_new_privs"].GetBool());
    CHECK(report["seccomp_mode"].GetInt64() == 2);
    const auto& limits = report["rlimits"];
    const std::int64_t nproc = outcome.started->mechanisms.rlimits.process_count;
    CHECK(pair_of(limits["cpu_seconds"]) == std::vector<std::int64_t>{5, 6});
    CHECK(pair_of(limits["address_space_bytes"]) == std::vector<std::int64_t>{512 << 20, 512 << 20});
    CHECK(pair_of(limits["file_size_bytes"]) == std::vector<std::int64_t>{10 << 20, 10 << 20});
    CHECK(pair_of(limits["process_count"]) == std::vector<std::int64_t>{nproc, nproc});
    CHECK(pair_of(limits["open_files"]) == std::vector<std::int64_t>{256, 256});
    CHECK(pair_of(limits["core_bytes"]) == std::vector<std::int64_t>{0, 0});
    CHECK_FALSE(report["canary"]["readable"].GetBool());
    CHECK(std::string(report["cwd"].GetString()) == dir.workspace);
    // socket() is refused before a packet could leave: the probe reads EACCES as denied.
    REQUIRE(v4.port != 0);
    CHECK(std::string(report["network"]["ipv4"]["outcome"].GetString()) == "denied");
    if (v6.port != 0) CHECK(std::string(report["network"]["ipv6"]["outcome"].GetString()) == "denied");
  }

  // fd 4 crosses exec too, and the bootstrap loader closes it first (bootstrap_fd_tests.cpp).
  SUBCASE("the environment is exactly the launch's, and only fds 0-3 reach the program") {
    std::vector<std::string> expected;
    for (const auto& [key, value] : launch.environment) expected.push_back(key);
    const auto hello = parse_json(*outcome.hello);
    std::vector<std::string> reported;
    for (const auto& key : hello["report"]["environment_keys"].GetArray()) reported.emplace_back(key.GetString());
    CHECK(reported == expected);

    const auto value = returned(outcome);
    std::vector<std::string> execve_keys;
    for (const auto& key : value["environ"].GetArray()) execve_keys.emplace_back(key.GetString());
    CHECK(execve_keys == expected);  // what execve received, before Python touched anything
    std::vector<std::int64_t> fds;
    for (const auto& fd : value["fds"].GetArray()) fds.push_back(fd.GetInt64());
    // 0-3, plus the one listdir itself holds open.
    REQUIRE(fds.size() == 5);
    CHECK(std::vector<std::int64_t>(fds.begin(), fds.begin() + 4) == std::vector<std::int64_t>{0, 1, 2, 3});
    CHECK(std::string(value["stdin"].GetString()) == "/dev/null");
  }
}

TEST_CASE("network=unrestricted opens socket() for AF_INET and AF_INET6 only") {
  if (!have_root()) return;
  scratch dir;
  auto launch = default_launch(dir);
  launch.network = network_access::unrestricted;
  listener v4{AF_INET};
  launch.probe = {v4.port, 0};
  const auto outcome = run_program(launch, R"(
import socket
def errno_of(make):
    try:
        make().close()
        return 0
    except OSError as e:
        return e.errno
return {"inet": errno_of(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)),
        "inet6": errno_of(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)),
        "unix": errno_of(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)),
        "netlink": errno_of(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)),
        "packet": errno_of(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW)),
        "pair_unix": errno_of(lambda: socket.socketpair(socket.AF_UNIX)[0]),
        # /etc/hosts, read through Landlock's resolver rule; glibc's netlink query is refused.
        "localhost": sorted({a[4][0] for a in socket.getaddrinfo("localhost", 80, socket.AF_INET)})}
)");
  REQUIRE(outcome.hello);
  const auto hello = parse_json(*outcome.hello);
  // The grant is not undone by Landlock's TCP rights either: the probe reaches the listener.
  CHECK(std::string(hello["report"]["network"]["ipv4"]["outcome"].GetString()) == "connected");
  const auto value = returned(outcome);
  CHECK(value["inet"].GetInt() == 0);
  CHECK(value["inet6"].GetInt() == 0);
  CHECK(value["pair_unix"].GetInt() == 0);
  REQUIRE(value["localhost"].IsArray());
  REQUIRE(value["localhost"].Size() >= 1);
  CHECK(std::string(value["localhost"][0].GetString()).starts_with("127."));
  // A network grant is TCP/IP, never the host's local sockets or its kernel's routing tables.
  for (const char* family : {"unix", "netlink", "packet"}) {
    const std::string name = family;
    CAPTURE(name);
    CHECK(value[family].GetInt() == EACCES);
  }
  require_clean_exit(outcome);
}

TEST_CASE("seccomp: socket() of every family fails with EACCES; socketpair(AF_UNIX) works") {
  if (!have_root()) return;
  scratch dir;
  const auto outcome = run_program(default_launch(dir), R"(
import socket
def errno_of(make):
    try:
        make().close()
        return 0
    except OSError as e:
        return e.errno
def exception_of(make):
    try:
        make().close()
        return "none"
    except OSError as e:
        return type(e).__name__
return {"inet": errno_of(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)),
        "inet6": errno_of(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)),
        "netlink": errno_of(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)),
        "packet": errno_of(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW)),
        "unix": errno_of(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)),
        "unix_dgram": errno_of(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)),
        "unix_exception": exception_of(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)),
        "pair_inet": errno_of(lambda: socket.socketpair(socket.AF_INET)[0]),
        "pair_unix": errno_of(lambda: socket.socketpair(socket.AF_UNIX)[0])}
)");
  const auto value = returned(outcome);
  for (const char* family : {"inet", "inet6", "netlink", "packet", "unix", "unix_dgram", "pair_inet"}) {
    const std::string name = family;
    CAPTURE(name);
    CHECK(value[family].GetInt() == EACCES);
  }
  CHECK(std::string(value["unix_exception"].GetString()) == "PermissionError");
  CHECK(value["pair_unix"].GetInt() == 0);
  require_clean_exit(outcome);
}

TEST_CASE("Landlock at isolation=process: the interpreter, the workspace and TMPDIR, nothing else") {
  if (!have_root()) return;
  if (launcher_landlock_abi() == 0) {
    MESSAGE("skipped: this kernel has no Landlock, so the PROCESS level has no filesystem confinement");
    return;
  }
  scratch dir;
  // Readable by the dropped uid by its mode, in a directory it can traverse: only Landlock
  // stands between the program and these.
  const std::string readable = dir.root + "/readable-by-mode";
  const std::string writable_dir = dir.root + "/writable-by-mode";
  {
    const int fd = ::open(readable.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, "host\n", 5) == 5);
    ::close(fd);
    REQUIRE(::mkdir(writable_dir.c_str(), 01777) == 0);
    REQUIRE(::chmod(writable_dir.c_str(), 01777) == 0);
  }
  const auto outcome = run_program(default_launch(dir), fmt::format(R"(
import errno, os, json, sys
def attempt(action):
    try:
        action()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def write(path):
    with open(path, "w") as f:
        f.write("x")
return {{"read_outside": attempt(lambda: open("{readable}").read()),
        "list_outside": attempt(lambda: os.listdir("{writable}")),
        "write_outside": attempt(lambda: write("{writable}/x")),
        "write_host_tmp": attempt(lambda: write("/tmp/psych-landlock-process-{pid}")),
        "read_etc": attempt(lambda: open("/etc/passwd").read()),
        "write_workspace": attempt(lambda: write("in-workspace")),
        "write_tmpdir": attempt(lambda: write(os.path.join(os.environ["TMPDIR"], "in-tmp"))),
        "stdlib": json.dumps(sorted(__import__("collections").Counter("psych").items())),
        "proc_self": attempt(lambda: open("/proc/self/status").read()),
        "devnull": attempt(lambda: open("/dev/null", "w").write("x"))}}
)",
                                                                    fmt::arg("readable", readable),
                                                                    fmt::arg("writable", writable_dir),
                                                                    fmt::arg("pid", ::getpid())));
  const auto value = returned(outcome);
  // Each of these succeeds for the same uid without Landlock: the modes allow it.
  for (const char* key : {"read_outside", "list_outside", "write_outside", "write_host_tmp", "read_etc"}) {
    const std::string name = key;
    CAPTURE(name);
    CHECK(std::string(value[key].GetString()) == "EACCES");
  }
  for (const char* key : {"write_workspace", "write_tmpdir", "proc_self", "devnull"}) {
    const std::string name = key;
    CAPTURE(name);
    CHECK(std::string(value[key].GetString()) == "ok");
  }
  CHECK(std::string(value["stdlib"].GetString()) == R"([["c", 1], ["h", 1], ["p", 1], ["s", 1], ["y", 1]])");
  CHECK(::access((writable_dir + "/x").c_str(), F_OK) != 0);
  const std::string host_tmp = "/tmp/psych-landlock-process-" + std::to_string(::getpid());
  CHECK(::access(host_tmp.c_str(), F_OK) != 0);
  ::unlink(host_tmp.c_str());
  require_clean_exit(outcome);
}

TEST_CASE("seccomp: the dangerous calls are refused even at isolation=process") {
  if (!have_root()) return;
  scratch dir;
  // As root (allow_same_uid), so the filter is the only thing saying no: every call below is
  // built to fail harmlessly with another errno (EFAULT, EINVAL, ESRCH, ENOTTY...) without it.
  auto launch = default_launch(dir);
  launch.run_as.reset();
  launch.allow_same_uid = true;
  const auto outcome = run_program(launch, R"(
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(number, *args):
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(number), *[ctypes.c_ulong(a) for a in args])
    return ctypes.get_errno() if result == -1 else 0
def fork_status():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    return os.waitpid(pid, 0)[1]
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
CLONE_NEWUSER, CLONE_FS = 0x10000000, 0x200
return {
    "ptrace": call(101, 12, 1, 0, 0),                   # PTRACE_GETREGS on a process not traced
    "process_vm_readv": call(310, os.getpid(), 0, 0, 0, 0, 0),
    "unshare": call(272, CLONE_NEWUSER | 1),            # bit 0 is invalid for unshare
    "clone_newuser": call(56, CLONE_NEWUSER | CLONE_FS, 0, 0, 0, 0),  # an invalid pair
    "setns": call(308, 0, 0),                           # fd 0 is /dev/null
    "mount": call(165, 0, 0, 0, 0, 0),
    "umount2": call(166, 0, 0),
    "pivot_root": call(155, 0, 0),
    "chroot": call(161, 0),
    "fsopen": call(430, 0, 0),
    "keyctl": call(250, 0xFFFF),
    "add_key": call(248, 0, 0, 0, 0, 0),
    "request_key": call(249, 0, 0, 0, 0),
    "bpf": call(321, 0xFFFF, 0, 0),
    "perf_event_open": call(298, 0, 0, 0, 0, 0),
    "userfaultfd": call(323, 0xFFFF),
    "kexec_load": call(246, 0, 0, 0, 0xDEAD0000),       # invalid flags: no image is touched
    "init_module": call(175, 0, 0, 0),
    "finit_module": call(313, 0, 0, 0xFFFF),
    "delete_module": call(176, 0, 0),
    "io_uring_setup": call(425, 1, 0),
    "open_by_handle_at": call(304, 0, 0, 0),
    "tiocsti": call(16, 0, TIOCSTI, 0),
    "tiocsti_high_bits": call(16, 0, (1 << 32) | TIOCSTI, 0),
    "tioclinux": call(16, 0, TIOCLINUX, 0),
    "clone3": call(435, 0, 0),
    "fork_still_works": fork_status(),
}
)");
  const auto value = returned(outcome);
  for (const char* denied : {"ptrace", "process_vm_readv", "unshare", "clone_newuser", "setns", "mount",
                             "umount2", "pivot_root", "chroot", "fsopen", "keyctl", "add_key",
                             "request_key", "bpf", "perf_event_open", "userfaultfd", "kexec_load",
                             "init_module", "finit_module", "delete_module", "io_uring_setup",
                             "open_by_handle_at", "tiocsti", "tiocsti_high_bits", "tioclinux"}) {
    const std::string call = denied;  // CAPTURE prints a std::string, not a char pointer
    CAPTURE(call);
    CHECK(value[denied].GetInt() == EPERM);
  }
  CHECK(value["clone3"].GetInt() == ENOSYS);
  CHECK(value["fork_still_works"].GetInt() == 0);
  require_clean_exit(outcome);
}

TEST_CASE("seccomp: a call through the x32 ABI kills the process") {
  if (!have_root()) return;
  scratch dir;
  const auto outcome = run_program(default_launch(dir), R"(
import ctypes
ctypes.CDLL(None).syscall(ctypes.c_long(0x40000000 | 39))   # x32 getpid
return "survived"
)");
  CHECK_FALSE(outcome.done);
  REQUIRE(outcome.exit);
  CHECK(outcome.exit->signal == SIGSYS);
  CHECK(outcome.exit->survivors == 0);
}

TEST_CASE("the wall clock ends a program that sleeps, and its tree") {
  if (!have_root()) return;
  scratch dir;
  auto launch = default_launch(dir);
  launch.limits.wall_seconds = 1.0;
  const auto outcome = run_program(launch, "import time\ntime.sleep(30)");
  REQUIRE(outcome.started);
  CHECK_FALSE(outcome.done);
  REQUIRE(outcome.exit);
  CHECK(outcome.exit->limit_hit == limit_name::wall_seconds);
  CHECK(outcome.exit->signal == SIGKILL);
  CHECK_FALSE(outcome.exit->cancelled);
  CHECK(outcome.exit->wall_seconds >= 1.0);
  CHECK(outcome.exit->wall_seconds < 5.0);
  CHECK(outcome.exit->survivors == 0);
  CHECK(process_gone(static_cast<pid_t>(outcome.started->pid)));
  CHECK(outcome.launcher_status == 0);
}

TEST_CASE("cancel kills the tree and still answers with exit") {
  if (!have_root()) return;
  scratch dir;
  run_options options;
  options.cancel_after = std::chrono::milliseconds(300);
  std::optional<limit_name> expected_limit;
  SUBCASE("reason cancelled") {
    options.cancel_reason = protocol::cancel_reason::cancelled;
    expected_limit = std::nullopt;
  }
  SUBCASE("reason timeout") {
    options.cancel_reason = protocol::cancel_reason::timeout;
    expected_limit = limit_name::wall_seconds;
  }
  const auto outcome = run_program(default_launch(dir), "import time\ntime.sleep(30)", options);
  REQUIRE(outcome.started);
  REQUIRE(outcome.exit);
  CHECK(outcome.exit->cancelled);
  CHECK(outcome.exit->limit_hit == expected_limit);
  CHECK(outcome.exit->signal == SIGKILL);
  CHECK(outcome.exit->wall_seconds < 5.0);
  CHECK(outcome.exit->survivors == 0);
  CHECK(process_gone(static_cast<pid_t>(outcome.started->pid)));
  CHECK(outcome.launcher_status == 0);
}

TEST_CASE("a CPU spin ends at cpu_seconds") {
  if (!have_root()) return;
  scratch dir;
  auto launch = default_launch(dir);
  launch.limits.cpu_seconds = 1.0;
  launch.limits.wall_seconds = 15.0;
  const auto outcome = run_program(launch, "while True:\n    pass");
  REQUIRE(outcome.exit);
  CHECK(outcome.exit->limit_hit == limit_name::cpu_seconds);
  CHECK(outcome.exit->signal == SIGXCPU);
  // It spun for about its budget, not ended early by something else. rusage's user+system is the
  // tick-sampled split scaled to the runtime, and the interpreter is two threads (the output
  // flusher): on a loaded 2-core host it was measured at 0.81 s for a SIGXCPU at 1 s.
  CHECK(outcome.exit->user_seconds + outcome.exit->system_seconds >= 0.75);
  CHECK_FALSE(outcome.exit->cancelled);
  CHECK(outcome.exit->survivors == 0);
}

TEST_CASE("a daemon that called setsid() and forked twice is killed when the program ends") {
  if (!have_root()) return;
  scratch dir;
  const auto outcome = run_program(default_launch(dir), R"(
import os
r, w = os.pipe()
child = os.fork()
if child == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(w, b"%d %d" % (os.getpid(), os.getsid(0)))
        import time
        time.sleep(30)
    os._exit(0)
os.waitpid(child, 0)
pid, sid = map(int, os.read(r, 64).split())
return {"pid": pid, "sid": sid, "child": child, "me": os.getsid(0)}
)");
  const auto value = returned(outcome);
  const auto grandchild = static_cast<pid_t>(value["pid"].GetInt64());
  // It left the program's session: the session of the child that called setsid().
  CHECK(value["sid"].GetInt64() == value["child"].GetInt64());
  CHECK(value["me"].GetInt64() != value["sid"].GetInt64());
  REQUIRE(outcome.exit);
  CHECK(outcome.exit->exit_code == 0);
  CHECK(outcome.exit->killed >= 1);
  CHECK(outcome.exit->survivors == 0);
  CHECK(process_gone(grandchild));
}

TEST_CASE("an interpreter that cannot be exec'd is an error frame, and nothing ran") {
  if (!have_root()) return;
  scratch dir;
  auto launch = default_launch(dir);
  launch.interpreter = dir.root + "/no-such-python";
  const auto outcome = launch_only(launch);
  CHECK_FALSE(outcome.started);
  REQUIRE(outcome.error);
  CHECK(outcome.error->stage == protocol::launch_stage::exec);
  CHECK(outcome.error->syscall == "execve");
  CHECK(outcome.error->error_number == ENOENT);
  CHECK(outcome.launcher_status == 1);
}

TEST_CASE("an identity that is no drop is refused unless allow_same_uid") {
  if (!have_root()) return;
  scratch dir;
  auto launch = default_launch(dir);
  SUBCASE("run_as null keeps the worker's uid") { launch.run_as.reset(); }
  SUBCASE("run_as uid 0") { launch.run_as = protocol::identity{0, 0}; }
  SUBCASE("run_as gid 0") { launch.run_as = protocol::identity{test_uid, 0}; }
  const auto outcome = launch_only(launch);
  CHECK_FALSE(outcome.started);
  REQUIRE(outcome.error);
  CHECK(outcome.error->stage == protocol::launch_stage::identity);
  CHECK(outcome.launcher_status == 2);
}

TEST_CASE("allow_same_uid lets the child keep the worker's uid") {
  if (!have_root()) return;
  scratch dir;
  auto launch = default_launch(dir);
  launch.run_as.reset();
  launch.allow_same_uid = true;
  const auto outcome = run_program(launch, "return 1");
  REQUIRE(outcome.started);
  CHECK_FALSE(outcome.started->mechanisms.uid_drop);
  REQUIRE(outcome.hello);
  CHECK(parse_json(*outcome.hello)["report"]["uid"].GetInt64() == ::getuid());
  require_clean_exit(outcome);
}

TEST_CASE("isolation=isolated: the interpreter runs as the namespace's root, pid 2 under its own init") {
  if (!have_root()) return;
  scratch dir;
  auto launch = default_launch(dir);
  launch.isolation = isolation_level::isolated;
  const auto outcome = run_program(launch, "import os\nreturn [os.getpid(), os.getppid(), os.getuid(), os.getcwd()]");
  REQUIRE(outcome.started);
  const auto& m = outcome.started->mechanisms;
  CHECK(m.namespaces == std::vector<std::string>{"user", "mount", "pid", "net", "ipc", "uts", "cgroup"});
  CHECK(m.uid_drop);
  CHECK(m.process_count_base == 1);
  CHECK_FALSE(m.root_entries.empty());
  REQUIRE(outcome.hello);
  const auto hello = parse_json(*outcome.hello);
  CHECK(std::string(hello["report"]["uid_map"].GetString()) == fmt::format("0 {} 1", launch.run_as->uid));
  CHECK(std::string(hello["report"]["cwd"].GetString()) == "/workspace");
  REQUIRE(outcome.done);
  CHECK(outcome.done->find(R"("value":[2,1,0,"/workspace"])") != std::string::npos);
  require_clean_exit(outcome);
}

TEST_CASE("isolation=isolated as root refuses to map the sandbox's root to host root") {
  if (!have_root()) return;
  scratch dir;
  auto launch = default_launch(dir);
  launch.isolation = isolation_level::isolated;
  launch.run_as.reset();
  launch.allow_same_uid = true;
  const auto outcome = launch_only(launch);
  REQUIRE(outcome.error);
  CHECK(outcome.error->stage == protocol::launch_stage::identity);
  CHECK(outcome.launcher_status == 1);
}

TEST_CASE("a bad request is one error frame and exit code 2") {
  if (!have_root()) return;
  scratch dir;
  auto launch = default_launch(dir);
  auto stage = protocol::launch_stage::launch;
  SUBCASE("contract version") { launch.version = 2; }
  SUBCASE("isolation=isolated with a network grant") {
    launch.isolation = isolation_level::isolated;
    launch.network = network_access::unrestricted;
    stage = protocol::launch_stage::isolation;
  }
  SUBCASE("a relative workspace") { launch.workspace = "workspace"; }
  SUBCASE("a relative interpreter") { launch.interpreter = "python3"; }
  SUBCASE("a token that is not hex") { launch.token = "not hex"; }
  SUBCASE("a zero wall clock") {
    launch.limits.wall_seconds = 0.0;
    stage = protocol::launch_stage::limits;
  }
  SUBCASE("an environment key with '='") {
    launch.environment["A=B"] = "c";
    stage = protocol::launch_stage::environment;
  }
  const auto outcome = launch_only(launch);
  REQUIRE(outcome.error);
  CHECK(outcome.error->stage == stage);
  if (stage == protocol::launch_stage::isolation)
    CHECK(outcome.error->message.find("network_not_offered") != std::string::npos);
  CHECK(outcome.launcher_status == 2);
}

TEST_CASE("control must open with a well-formed launch") {
  if (!have_root()) return;
  std::string first;
  SUBCASE("a cancel first") { first = R"({"type":"cancel","reason":"cancelled"})" "\n"; }
  SUBCASE("not JSON") { first = "launch please\n"; }
  SUBCASE("an unknown type") { first = R"({"type":"hello"})" "\n"; }
  SUBCASE("EOF inside a frame") { first = R"({"type":"launch")"; }
  launcher process;
  process.send_raw(first);
  if (first.back() != '\n') process.end_control_writes();
  const auto line = process.control_line();
  REQUIRE(line);
  auto frame = protocol::decode_frame<protocol::launch_error_frame>(*line);
  REQUIRE(frame);
  CHECK(std::get<protocol::launch_error_frame>(frame.value()).stage == protocol::launch_stage::protocol);
  CHECK(process.wait() == 2);
}

TEST_CASE("when the host goes away the launcher ends the tree and exits") {
  if (!have_root()) return;
  scratch dir;
  launcher process;
  const pid_t child = start_until_hello(process, dir);
  process.close_control();
  CHECK(process.wait() == 1);
  CHECK(process_gone(child));
}

TEST_CASE("a termination signal to the launcher ends the tree and still answers with exit") {
  if (!have_root()) return;
  scratch dir;
  launcher process;
  const pid_t child = start_until_hello(process, dir);
  ::kill(process.pid(), SIGTERM);
  const auto reply = process.control_line();
  REQUIRE(reply);
  auto exit = protocol::decode_frame<protocol::exit_frame>(*reply);
  REQUIRE(exit);
  CHECK(std::get<protocol::exit_frame>(exit.value()).cancelled);
  CHECK(std::get<protocol::exit_frame>(exit.value()).signal == SIGKILL);
  CHECK(process.wait() == 0);
  CHECK(process_gone(child));
}

TEST_CASE("RLIMIT_NPROC holds the program to process_count") {
  if (!have_root()) return;
  scratch dir;
  auto launch = default_launch(dir);
  // A uid of its own, so no concurrent test's processes move the count between launch and fork.
  launch.run_as = protocol::identity{test_uid + 123, test_uid + 123};
  launch.limits.process_count = 4;
  const auto outcome = run_program(launch, R"(
import os, time
children, failure = [], 0
for _ in range(20):
    try:
        pid = os.fork()
    except BlockingIOError as e:
        failure = e.errno
        break
    if pid == 0:
        time.sleep(5)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
return {"forked": len(children), "errno": failure}
)");
  const auto value = returned(outcome);
  CHECK(value["errno"].GetInt() == EAGAIN);
  // The interpreter and the bootstrap's output flusher (a thread: RLIMIT_NPROC counts threads) are
  // the first two of the four.
  CHECK(value["forked"].GetInt() == 2);
  require_clean_exit(outcome);
}

TEST_CASE("a cancel that arrives in the same write as the launch is not lost") {
  if (!have_root()) return;
  scratch dir;
  launcher process;
  process.send_raw(protocol::encode_frame(default_launch(dir)) +
                   protocol::encode_frame(protocol::cancel_frame{protocol::cancel_reason::cancelled}));
  const auto started = process.control_line();
  REQUIRE(started);
  REQUIRE(protocol::decode_frame<protocol::started_frame>(*started));
  const auto reply = process.control_line(5s);
  REQUIRE(reply);
  auto exit = protocol::decode_frame<protocol::exit_frame>(*reply);
  REQUIRE(exit);
  CHECK(std::get<protocol::exit_frame>(exit.value()).cancelled);
  CHECK(process.wait() == 0);
}

TEST_CASE("the launcher keeps neither the program's output pipes nor the channel") {
  if (!have_root()) return;
  scratch dir;
  launcher process;
  process.send(default_launch(dir));
  REQUIRE(process.control_line());
  REQUIRE(process.channel_line());  // the interpreter is up; the launcher is supervising
  const auto fd_target = [&](int fd) {
    char target[256] = {};
    const auto path = "/proc/" + std::to_string(process.pid()) + "/fd/" + std::to_string(fd);
    const auto n = ::readlink(path.c_str(), target, sizeof target - 1);
    return n < 0 ? std::string("closed") : std::string(target, static_cast<std::size_t>(n));
  };
  CHECK(fd_target(1) == "/dev/null");
  CHECK(fd_target(2) == "/dev/null");
  CHECK(fd_target(4) == "closed");
  process.send(protocol::cancel_frame{protocol::cancel_reason::cancelled});
  REQUIRE(process.control_line());
  CHECK(process.wait() == 0);
}

TEST_CASE("the interpreter dies with the launcher (PR_SET_PDEATHSIG survives the uid drop)") {
  if (!have_root()) return;
  scratch dir;
  // Orphans come to this test process, so it can reap the interpreter and read how it died.
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0);
  launcher process;
  const pid_t child = start_until_hello(process, dir);
  ::kill(process.pid(), SIGKILL);
  CHECK(process.wait() == 128 + SIGKILL);
  int status = 0;
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
  if (pidfd >= 0) {
    pollfd exited{pidfd, POLLIN, 0};
    ::poll(&exited, 1, 5000);
    ::close(pidfd);
  }
  const pid_t reaped = ::waitpid(child, &status, WNOHANG);
  ::prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
  REQUIRE(reaped == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
}

namespace {

/// A control line decoded as one of `Frames`; fails the test on anything else.
template <class... Frames>
std::variant<Frames...> control_frame(launcher& process, std::chrono::milliseconds timeout = 15s) {
  const auto line = process.control_line(timeout);
  REQUIRE_MESSAGE(line, "no control frame in time");
  auto frame = protocol::decode_frame<Frames...>(*line);
  REQUIRE_MESSAGE(frame, *line);
  return std::move(frame).value();
}

}  // namespace

TEST_CASE("a prepared launch holds no clock until narrow; then the narrowed limits hold, as the child lowered them") {
  if (!have_root()) return;
  scratch dir;
  auto launch = default_launch(dir);
  launch.prepared = true;
  launch.limits.wall_seconds = 1.0;
  launcher process;
  process.send(launch);
  REQUIRE(std::holds_alternative<protocol::started_frame>(control_frame<protocol::started_frame, protocol::launch_error_frame>(process)));
  REQUIRE(process.channel_line());  // hello
  std::this_thread::sleep_for(1500ms);  // past the launch's wall clock: waiting is not running
  protocol::narrow_frame narrow{launch.limits};
  narrow.limits.address_space_bytes = std::uint64_t{200} << 20;
  narrow.limits.wall_seconds = 1.0;
  process.send(narrow);
  const auto narrowed = std::get<protocol::narrowed_frame>(control_frame<protocol::narrowed_frame>(process));
  CHECK(narrowed.rlimits.address_space_bytes == std::int64_t{200} << 20);
  process.send_channel(protocol::lower_limits_frame{narrowed.rlimits});
  const auto lowered = process.channel_line();
  REQUIRE(lowered);
  const auto observed = std::get<protocol::lowered_frame>(protocol::decode_frame<protocol::lowered_frame>(*lowered).value());
  CHECK(observed.rlimits.address_space_bytes == rlimit_pair{std::int64_t{200} << 20, std::int64_t{200} << 20});
  process.send_channel(protocol::run_frame{"import time\ntime.sleep(30)", "<program>"});
  const auto exit = std::get<protocol::exit_frame>(control_frame<protocol::exit_frame>(process, 20s));
  CHECK(exit.limit_hit == limit_name::wall_seconds);
  CHECK(exit.wall_seconds >= 1.0);
  CHECK(exit.wall_seconds < 5.0);  // counted from the narrowing, not the launch
  CHECK(exit.survivors == 0);
  CHECK(process.wait() == 0);
}

TEST_CASE("a narrowing above the launch's limits is refused, and the execution ends before any program") {
  if (!have_root()) return;
  scratch dir;
  auto launch = default_launch(dir);
  launch.prepared = true;
  launcher process;
  process.send(launch);
  REQUIRE(std::holds_alternative<protocol::started_frame>(control_frame<protocol::started_frame, protocol::launch_error_frame>(process)));
  REQUIRE(process.channel_line());  // hello
  protocol::narrow_frame narrow{launch.limits};
  narrow.limits.address_space_bytes = launch.limits.address_space_bytes.value * 2;
  process.send(narrow);
  const auto error = std::get<protocol::launch_error_frame>(control_frame<protocol::launch_error_frame>(process));
  CHECK(error.stage == protocol::launch_stage::narrow);
  const auto exit = std::get<protocol::exit_frame>(control_frame<protocol::exit_frame>(process));
  CHECK(exit.cancelled);
  CHECK(exit.survivors == 0);
  CHECK(process.wait() == 0);
}

TEST_CASE("narrow on a launch that was not prepared breaks the contract: the execution ends as cancelled") {
  if (!have_root()) return;
  scratch dir;
  const auto launch = default_launch(dir);
  launcher process;
  process.send(launch);
  REQUIRE(std::holds_alternative<protocol::started_frame>(control_frame<protocol::started_frame, protocol::launch_error_frame>(process)));
  process.send(protocol::narrow_frame{launch.limits});
  const auto exit = std::get<protocol::exit_frame>(control_frame<protocol::exit_frame>(process));
  CHECK(exit.cancelled);
  CHECK(exit.survivors == 0);
  CHECK(process.wait() == 0);
}
