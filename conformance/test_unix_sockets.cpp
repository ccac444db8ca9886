// The host's sockets and files, from a program at either level: socket() is refused for every
// family (the program's channel to the host is inherited, it never needs a socket of its own),
// socketpair() still serves asyncio, and where the kernel has Landlock the PROCESS level reads
// only the interpreter, the workspace and its temp dir, and writes only the last two.
//
// Every listener here is the test's own, on a path under /tmp, in the abstract namespace, or on
// 127.0.0.1 / ::1: nothing ever addresses anything but loopback.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <utility>

#include "backends_posix.hpp"
#include "program_text.hpp"
#include "os/posix.hpp"
#include "host_kernel.hpp"
#include "invoker.hpp"

using namespace psych;
using conformance::backend_under_test;
using conformance::for_each_backend;
using conformance::for_each_backend_as;
namespace fs = std::filesystem;

using conformance::fill;

namespace {

using psych::host::unique_fd;  // the host's one owning descriptor (src/host/os/posix.hpp)


/// This file's uid: distinct from the suite's and the hostile cases', so that what it leaves
/// behind is attributable.
constexpr std::int64_t sockets_uid = 1'500'210;

/// A directory of the test's, under `parent`, with `mode`; removed with its contents at the end.
class test_dir {
 public:
  test_dir(const std::string& parent, const char* prefix, mode_t mode) {
    std::string pattern = parent + "/" + prefix + "XXXXXX";
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    REQUIRE(::chmod(pattern.c_str(), mode) == 0);
    path_ = pattern;
  }
  ~test_dir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  test_dir(const test_dir&) = delete;
  test_dir& operator=(const test_dir&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// A Unix stream listener at a path (mode 0777: anyone may connect) or, with a leading '@', in
/// the abstract namespace, which has no permissions at all.
unique_fd unix_listener(const std::string& where) {
  unique_fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  REQUIRE(fd.get() >= 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  REQUIRE(where.size() < sizeof address.sun_path);
  std::memcpy(address.sun_path, where.data(), where.size());
  auto length = static_cast<socklen_t>(sizeof address);
  if (where[0] == '@') {
    address.sun_path[0] = '\0';
    length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + where.size());
  }
  REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), length) == 0);
  REQUIRE(::listen(fd.get(), 16) == 0);
  if (where[0] != '@') REQUIRE(::chmod(where.c_str(), 0777) == 0);
  return fd;
}

/// A TCP listener on 127.0.0.1 or ::1 with a kernel-chosen port; fd -1 when the family is absent.
struct tcp_listener {
  unique_fd fd;
  int port = 0;
};

std::unique_ptr<tcp_listener> loopback_listener(int family) {
  auto made = std::make_unique<tcp_listener>();
  const int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return made;
  sockaddr_storage address{};
  auto length = static_cast<socklen_t>(family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
  if (family == AF_INET) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
    v4->sin_family = AF_INET;
    v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  } else {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
    v6->sin6_family = AF_INET6;
    v6->sin6_addr = in6addr_loopback;
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 || ::listen(fd, 16) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    return made;
  }
  made->port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&address)->sin_port
                                       : reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  made->fd = unique_fd(fd);
  return made;
}

/// Whether a connection is waiting on the listener: poll with a timeout, then accept it (so a
/// positive answer is a real connection, not a spurious wakeup).
bool connection_arrived(int listener) {
  pollfd p{.fd = listener, .events = POLLIN, .revents = 0};
  if (::poll(&p, 1, 200) <= 0) return false;
  const int accepted = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (accepted < 0) return false;
  ::close(accepted);
  return true;
}

/// The control: the test's own, unconfined connect reaches the listener. Without it, "nothing
/// arrived" could mean the listener never worked.
bool reachable_unconfined(const std::string& where) {
  unique_fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, where.data(), where.size());
  auto length = static_cast<socklen_t>(sizeof address);
  if (where[0] == '@') {
    address.sun_path[0] = '\0';
    length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + where.size());
  }
  return fd.get() >= 0 && ::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), length) == 0;
}

/// One top-level string member of the program's flat returned object; "<absent>" otherwise.
std::string member(const sandbox_result& r, const std::string& key) {
  if (!r.value) return "<no value>";
  const auto& text = r.value->text;
  const auto at = text.find("\"" + key + "\":\"");
  if (at == std::string::npos) return "<absent>";
  const auto start = at + key.size() + 4;
  return text.substr(start, text.find('"', start) - start);
}

std::string described(const sandbox_result& r) {
  std::string text = r.value ? "value: " + r.value->text : "no value";
  if (r.failure) text += "\nfailure: " + r.failure->message + "\n" + r.failure->traceback;
  return text;
}

}  // namespace

TEST_CASE("sockets: no listener of the host is reached, by any family, and the program sees PermissionError") {
  for_each_backend_as(sockets_uid, [](sandbox& sb, const backend_under_test&) {
    // World-writable and sticky, like /tmp/.X11-unix: the socket in it is anyone's to connect to.
    test_dir shared("/tmp", "psych-sockets-", 01777);
    const auto path = shared.path() + "/open.sock";
    std::random_device entropy;
    const auto abstract = "@psych-sockets-" + std::to_string(::getpid()) + "-" + std::to_string(entropy());
    const auto path_listener = unix_listener(path);
    const auto abstract_listener = unix_listener(abstract);
    const auto v4 = loopback_listener(AF_INET);
    const auto v6 = loopback_listener(AF_INET6);
    REQUIRE(v4->fd.get() >= 0);
    REQUIRE(reachable_unconfined(path));
    REQUIRE(reachable_unconfined(abstract));
    REQUIRE(connection_arrived(path_listener.get()));      // the control connections, accepted
    REQUIRE(connection_arrived(abstract_listener.get()));  // here so they are not counted below

    const auto r = conformance::run(sb,
                                    fill(R"PY(
import errno, socket
def reach(family, kind, address):
    try:
        s = socket.socket(family, kind)
    except OSError as e:
        return "socket:%s:%s" % (type(e).__name__, errno.errorcode.get(e.errno, e.errno))
    try:
        s.settimeout(1)
        s.connect(address)
        return "connected"
    except OSError as e:
        return "connect:%s:%s" % (type(e).__name__, errno.errorcode.get(e.errno, e.errno))
    finally:
        s.close()
out = {
    "path": reach(socket.AF_UNIX, socket.SOCK_STREAM, "{PATH}"),
    "abstract": reach(socket.AF_UNIX, socket.SOCK_STREAM, "\0{ABSTRACT}"),
    "inet": reach(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", {PORT4})),
    "netlink": reach(socket.AF_NETLINK, socket.SOCK_RAW, (0, 0)),
    "packet": reach(socket.AF_PACKET, socket.SOCK_RAW, ("lo", 0)),
}
if {PORT6}:
    out["inet6"] = reach(socket.AF_INET6, socket.SOCK_STREAM, ("::1", {PORT6}))
return out
)PY",
                                         {{"PATH", path},
                                          {"ABSTRACT", abstract.substr(1)},
                                          {"PORT4", std::to_string(v4->port)},
                                          {"PORT6", std::to_string(v6->port)}}),
                                    {.wall_seconds = 10.0});
    REQUIRE_MESSAGE(r.ok(), described(r));
    // Uncontained (the same uid, no filter), "path", "abstract", "inet" and "inet6" connect and
    // "netlink" is created; the filter refuses socket() itself at both levels.
    for (const char* key : {"path", "abstract", "inet", "netlink", "packet"})
      CHECK_MESSAGE(member(r, key) == "socket:PermissionError:EACCES", key);
    if (v6->fd.get() >= 0) CHECK(member(r, "inet6") == "socket:PermissionError:EACCES");
    CHECK_FALSE(connection_arrived(path_listener.get()));
    CHECK_FALSE(connection_arrived(abstract_listener.get()));
    CHECK_FALSE(connection_arrived(v4->fd.get()));
    if (v6->fd.get() >= 0) CHECK_FALSE(connection_arrived(v6->fd.get()));
    CHECK(r.network_denied);
    CHECK(r.guarantees.network == enforcement::enforced);
  });
}

TEST_CASE("sockets: asyncio still runs on socketpair(), with bindings gathered") {
  for_each_backend([](sandbox& sb, const auto&) {
    conformance::recording_invoker invoker;
    const auto r = sb.run({.program = R"PY(
import asyncio, socket
await asyncio.sleep(0)
replies = await asyncio.gather(call_tool("echo", {"i": 1}), asyncio.sleep(0, result="slept"),
                               call_tool("echo", {"i": 2}))
# A loop of its own, in a thread: asyncio.run makes a new selector loop, whose self-pipe is a
# socketpair, and closes it again.
inner = await asyncio.to_thread(asyncio.run, asyncio.sleep(0, result="inner"))
a, b = socket.socketpair()
a.sendall(b"pair")
echoed = b.recv(4).decode()
a.close()
b.close()
return {"first": replies[0]["arguments"]["i"], "middle": replies[1], "last": replies[2]["arguments"]["i"],
        "inner": inner, "pair": echoed}
)PY",
                           .terms = conformance::terms_for(sb),
                           .bindings = {{"echo", "answers with its arguments"}},
                           .invoker = &invoker});
    REQUIRE_MESSAGE(r.ok(), described(r));
    CHECK(r.value->text == R"({"first":1,"middle":"slept","last":2,"inner":"inner","pair":"pair"})");
    CHECK(invoker.calls == 2);
  });
}

TEST_CASE("sockets: with Landlock the PROCESS level reads only what the interpreter needs and writes only its own") {
  for_each_backend_as(sockets_uid, [](sandbox& sb, const backend_under_test& backend) {
    // Beside the executions' own directories, readable and writable by every uid by mode: only a
    // confinement of the program's paths keeps it out.
    test_dir beside(conformance::temp_root(), "psych-beside-", 0755);
    const auto secret = beside.path() + "/readable-by-mode";
    std::ofstream(secret) << "not the program's\n";
    REQUIRE(::chmod(secret.c_str(), 0644) == 0);
    const auto drop = beside.path() + "/drop";
    REQUIRE(::mkdir(drop.c_str(), 01777) == 0);
    REQUIRE(::chmod(drop.c_str(), 01777) == 0);
    const auto host_tmp = "/tmp/psych-sockets-landlock-" + std::to_string(::getpid());

    const auto r = conformance::run(sb,
                                    fill(R"PY(
import errno, hashlib, json, os, sqlite3, subprocess, tempfile
def attempt(action):
    try:
        action()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def write(path):
    with open(path, "w") as f:
        f.write("x")
db = sqlite3.connect(":memory:")
db.execute("create table t (x)")
fd, made = tempfile.mkstemp()
os.close(fd)
return {
    "read_beside": attempt(lambda: open("{SECRET}").read()),
    "list_beside": attempt(lambda: os.listdir("{DROP}")),
    "write_beside": attempt(lambda: write("{DROP}/x")),
    "write_host_tmp": attempt(lambda: write("{HOST_TMP}")),
    "read_passwd": attempt(lambda: open("/etc/passwd").read()),
    "write_workspace": attempt(lambda: write("mine")),
    "tempfile_in_tmpdir": str(made.startswith(os.environ["TMPDIR"])),
    "stdlib": hashlib.sha256(json.dumps([1]).encode()).hexdigest()[:8],
    "subprocess": str(subprocess.run(["/bin/true"]).returncode),
}
)PY",
                                         {{"SECRET", secret}, {"DROP", drop}, {"HOST_TMP", host_tmp}}),
                                    {.wall_seconds = 10.0});
    REQUIRE_MESSAGE(r.ok(), described(r));
    // What works at every level: the interpreter, its stdlib and extensions, a child process,
    // the workspace and TMPDIR.
    CHECK(member(r, "write_workspace") == "ok");
    CHECK(member(r, "tempfile_in_tmpdir") == "True");
    CHECK(member(r, "stdlib") == "080a9ed4");  // sha256("[1]")
    CHECK(member(r, "subprocess") == "0");
    const bool confined = isolated(backend) || conformance::host_landlock_abi() > 0;
    if (isolated(backend)) {
      // Another root: none of these host paths exists inside, and /tmp is its own tmpfs.
      for (const char* key : {"read_beside", "list_beside", "write_beside"})
        CHECK_MESSAGE(member(r, key) == "ENOENT", key);
    } else if (confined) {
      // Uncontained, the same uid reads, lists and writes every one of these: their modes allow it.
      for (const char* key : {"read_beside", "list_beside", "write_beside", "write_host_tmp", "read_passwd"})
        CHECK_MESSAGE(member(r, key) == "EACCES", key);
      // Not a mount boundary: the canary rule says unverified, never enforced.
      CHECK(r.guarantees.filesystem == enforcement::unverified);
    } else {
      // No Landlock in this kernel: PROCESS has no filesystem confinement, and says so.
      CHECK(member(r, "read_beside") == "ok");
      CHECK(r.guarantees.filesystem == enforcement::unavailable);
    }
    if (confined) {
      CHECK_FALSE(fs::exists(drop + "/x"));
      CHECK_FALSE(fs::exists(host_tmp));
    }
    ::unlink(host_tmp.c_str());
  });
}
