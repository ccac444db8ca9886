// Landlock (launchers/linux/landlock.hpp): what a restricted process can and cannot reach. Every
// restriction happens in a forked child, so the test process itself stays unrestricted; the child
// reports what it found as text, and "" means every check held.
#include <doctest/doctest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <csignal>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "landlock.hpp"
#include "skip.hpp"

using namespace psych::launcher;
namespace fs = std::filesystem;

namespace {

/// A directory tree of the test's making, removed with everything in it:
///   rx/file      under a read_execute directory
///   lone         a read_execute rule on a single file
///   rw/          read_write
///   outside/secret  under no rule at all
struct tree {
  fs::path root;

  tree() {
    char name[] = "/tmp/psych-landlock-XXXXXX";
    REQUIRE(::mkdtemp(name) != nullptr);
    root = name;
    fs::create_directories(root / "rx");
    fs::create_directories(root / "rw");
    fs::create_directories(root / "outside");
    std::ofstream(root / "rx" / "file") << "rx";
    std::ofstream(root / "lone") << "lone";
    std::ofstream(root / "outside" / "secret") << "secret";
  }
  ~tree() {
    std::error_code ignored;
    fs::remove_all(root, ignored);
  }
  tree(const tree&) = delete;
  tree& operator=(const tree&) = delete;

  std::string operator/(const char* relative) const { return (root / relative).string(); }

  landlock_paths paths() const {
    landlock_paths p;
    p.read_execute = {*this / "rx", *this / "lone"};
    p.read_write = {*this / "rw"};
    p.devices = {"/dev/null"};
    return p;
  }
};

/// false (reported as a skip) when this kernel has no Landlock: the cases then have nothing to check.
bool landlock_here(std::source_location where = std::source_location::current()) {
  if (landlock_abi() >= 1) return true;
  psych::testing::skip_case("Landlock is absent or disabled in this kernel (landlock_create_ruleset reports no ABI)",
                            where);
  return false;
}

landlock_ruleset prepared(const landlock_paths& paths) {
  auto ruleset = landlock_ruleset::prepare(paths);
  REQUIRE_MESSAGE(ruleset.has_value(), (ruleset ? "" : ruleset.error().message));
  return std::move(ruleset).value();
}

/// Runs `body` in a forked child and returns what it reported. The child never returns into doctest.
template <class Body>
std::string in_child(Body body) {
  int out[2];
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(out[0]);
    const std::string report = body();
    std::size_t done = 0;
    while (done < report.size()) {
      const ssize_t n = ::write(out[1], report.data() + done, report.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    ::_exit(0);
  }
  ::close(out[1]);
  std::string report;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(out[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    report.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  return report;
}

/// In the child: NoNewPrivs, then the restriction, as the launcher does. "" on success.
std::string restrict_to(const landlock_ruleset& ruleset) {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return std::string("prctl: ") + std::strerror(errno);
  const auto restricted = ruleset.restrict_self();
  return restricted ? "" : restricted.error().message;
}

std::string errno_name(int error_number) {
  if (error_number == 0) return "success";
  const char* name = ::strerrorname_np(error_number);
  return name != nullptr ? name : std::to_string(error_number);
}

/// The checks one child makes: each names itself and what it expected when it does not hold.
struct findings {
  std::string text;

  void expect(int got, int want, const std::string& what) {
    if (got != want) text += what + ": got " + errno_name(got) + ", want " + errno_name(want) + "\n";
  }
};

/// 0 when the call succeeded, else its errno.
int outcome(long result) { return result < 0 ? errno : 0; }

int open_outcome(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

int connect_outcome(int family, const void* address, socklen_t length) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  const int result = outcome(::connect(fd, static_cast<const sockaddr*>(address), length));
  ::close(fd);
  return result;
}

/// Descriptors this process holds, and whether every one is close-on-exec.
struct fd_census {
  int count = 0;
  int rulesets = 0;
  bool rulesets_cloexec = true;
};

fd_census take_census() {
  fd_census census;
  for (const auto& entry : fs::directory_iterator("/proc/self/fd")) {
    ++census.count;
    std::error_code ec;
    if (fs::read_symlink(entry.path(), ec).string() != "anon_inode:[landlock-ruleset]") continue;
    ++census.rulesets;
    const int fd = std::stoi(entry.path().filename().string());
    if ((::fcntl(fd, F_GETFD) & FD_CLOEXEC) == 0) census.rulesets_cloexec = false;
  }
  return census;
}

}  // namespace

TEST_CASE("the kernel offers Landlock and prepare builds for its ABI") {
  if (!landlock_here()) return;
  const tree t;
  const auto before = take_census();
  {
    const auto ruleset = prepared(t.paths());
    CHECK(ruleset.abi() >= 1);
    CHECK(ruleset.abi() <= landlock_abi());
    CHECK(ruleset.skipped().empty());
    // Only the ruleset fd stays (every O_PATH fd is closed again), and it is close-on-exec.
    const auto during = take_census();
    CHECK(during.count == before.count + 1);
    CHECK(during.rulesets == before.rulesets + 1);
    CHECK(during.rulesets_cloexec);
    MESSAGE(describe_landlock(ruleset.abi()));
  }
  CHECK(take_census().count == before.count);
}

TEST_CASE("file-system access is what the rules name and nothing else") {
  if (!landlock_here()) return;
  const tree t;
  const auto ruleset = prepared(t.paths());
  const int abi = ruleset.abi();
  const std::string report = in_child([&] {
    findings f;
    f.expect(open_outcome(t / "outside/secret", O_RDONLY), 0, "unrestricted: read outside every rule");
    if (auto failed = restrict_to(ruleset); !failed.empty()) return failed;

    // read_execute: read and list, never write or create.
    f.expect(open_outcome(t / "rx/file", O_RDONLY), 0, "read under read_execute");
    f.expect(open_outcome(t / "rx", O_RDONLY | O_DIRECTORY), 0, "list a read_execute directory");
    f.expect(open_outcome(t / "lone", O_RDONLY), 0, "read a file with its own rule");
    f.expect(open_outcome(t / "rx/file", O_WRONLY), EACCES, "write under read_execute");
    f.expect(open_outcome(t / "lone", O_WRONLY), EACCES, "write a read_execute file");
    f.expect(open_outcome(t / "rx/new", O_WRONLY | O_CREAT), EACCES, "create under read_execute");

    f.expect(open_outcome(t / "outside/secret", O_RDONLY), EACCES, "read outside every rule");
    f.expect(open_outcome(t / "outside", O_RDONLY | O_DIRECTORY), EACCES, "list outside every rule");
    f.expect(open_outcome(t / "outside/new", O_WRONLY | O_CREAT), EACCES, "create outside every rule");

    // read_write: everything a workspace needs.
    const int fd = ::open((t / "rw/file").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    f.expect(fd < 0 ? errno : 0, 0, "create under read_write");
    if (fd >= 0) {
      f.expect(outcome(::write(fd, "x", 1)), 0, "write under read_write");
      f.expect(outcome(::ftruncate(fd, 0)), 0, "truncate under read_write");
      ::close(fd);
    }
    f.expect(open_outcome(t / "rw/file", O_RDWR | O_TRUNC), 0, "open with O_TRUNC under read_write");
    f.expect(outcome(::mkdir((t / "rw/dir").c_str(), 0700)), 0, "mkdir under read_write");
    f.expect(outcome(::symlink("file", (t / "rw/link").c_str())), 0, "symlink under read_write");
    f.expect(outcome(::rename((t / "rw/link").c_str(), (t / "rw/link2").c_str())), 0, "rename in place");
    // Moving between directories is REFER, which ABI 1 cannot grant (EXDEV there).
    f.expect(outcome(::rename((t / "rw/file").c_str(), (t / "rw/dir/file").c_str())), abi >= 2 ? 0 : EXDEV,
             "rename into a subdirectory");
    f.expect(outcome(::unlink((t / (abi >= 2 ? "rw/dir/file" : "rw/file")).c_str())), 0, "unlink under read_write");
    f.expect(outcome(::unlink((t / "rw/link2").c_str())), 0, "unlink a symlink under read_write");
    f.expect(outcome(::rmdir((t / "rw/dir").c_str())), 0, "rmdir under read_write");
    // Moving out of the rules is refused whatever the ABI.
    f.expect(open_outcome(t / "rw/leaving", O_WRONLY | O_CREAT), 0, "create a file to move out");
    const int moved_out = outcome(::rename((t / "rw/leaving").c_str(), (t / "outside/leaving").c_str()));
    if (moved_out == 0) f.text += "rename out of read_write: succeeded\n";

    // devices: read and write, with O_TRUNC as Python's open(..., "w") asks, but only the named ones.
    f.expect(open_outcome("/dev/null", O_WRONLY | O_TRUNC), 0, "open /dev/null for writing with O_TRUNC");
    f.expect(open_outcome("/dev/null", O_RDONLY), 0, "read /dev/null");
    f.expect(open_outcome("/dev/zero", O_RDONLY), EACCES, "read a device that has no rule");
    return f.text;
  });
  CHECK_MESSAGE(report.empty(), report);
}

TEST_CASE("under read_write a fifo can be made, a device node cannot") {
  if (!landlock_here()) return;
  const tree t;
  const auto ruleset = prepared(t.paths());
  const std::string report = in_child([&] {
    findings f;
    if (auto failed = restrict_to(ruleset); !failed.empty()) return failed;
    f.expect(outcome(::mkfifo((t / "rw/fifo").c_str(), 0600)), 0, "mkfifo under read_write");
    f.expect(outcome(::mknod((t / "rw/null").c_str(), S_IFCHR | 0600, makedev(1, 3))), EACCES,
             "mknod a char device under read_write");
    f.expect(outcome(::mknod((t / "rw/block").c_str(), S_IFBLK | 0600, makedev(7, 0))), EACCES,
             "mknod a block device under read_write");
    return f.text;
  });
  CHECK_MESSAGE(report.empty(), report);
}

TEST_CASE("with ABI 4 every TCP connect and bind is denied, loopback included") {
  if (!landlock_here()) return;
  const tree t;
  const auto ruleset = prepared(t.paths());
  if (ruleset.abi() < 4) {
    psych::testing::skip_case(psych::testing::allowed_in_ci::landlock_abi_predates_feature,
                              "Landlock ABI " + std::to_string(ruleset.abi()) + " has no network rights (ABI 4)");
    return;
  }
  // A listener on loopback only: the child would reach it if nothing stopped it.
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(listener >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  REQUIRE(::bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(::listen(listener, 4) == 0);
  socklen_t length = sizeof address;
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) == 0);

  const std::string report = in_child([&] {
    findings f;
    f.expect(connect_outcome(AF_INET, &address, sizeof address), 0, "unrestricted: connect to 127.0.0.1");
    if (auto failed = restrict_to(ruleset); !failed.empty()) return failed;
    f.expect(connect_outcome(AF_INET, &address, sizeof address), EACCES, "connect to 127.0.0.1");
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    f.expect(fd < 0 ? errno : 0, 0, "socket(AF_INET) itself");
    if (fd >= 0) {
      sockaddr_in any_port{};
      any_port.sin_family = AF_INET;
      any_port.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      f.expect(outcome(::bind(fd, reinterpret_cast<const sockaddr*>(&any_port), sizeof any_port)), EACCES,
               "bind to 127.0.0.1");
      ::close(fd);
    }
    return f.text;
  });
  ::close(listener);
  CHECK_MESSAGE(report.empty(), report);
}

TEST_CASE("with a network grant TCP is not handled, the filesystem still is") {
  if (!landlock_here()) return;
  const tree t;
  auto paths = t.paths();
  paths.network = psych::network_access::unrestricted;
  const auto ruleset = prepared(paths);
  if (ruleset.abi() < 4) {
    MESSAGE("Landlock ABI " << ruleset.abi() << " has no network rights (ABI 4): nothing to leave unhandled");
    return;
  }
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(listener >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
  REQUIRE(::listen(listener, 4) == 0);
  socklen_t length = sizeof address;
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) == 0);

  const std::string report = in_child([&] {
    findings f;
    if (auto failed = restrict_to(ruleset); !failed.empty()) return failed;
    // Denied by the ruleset without the grant (the case above): here the grant holds.
    f.expect(connect_outcome(AF_INET, &address, sizeof address), 0, "connect to 127.0.0.1 with the grant");
    f.expect(open_outcome(t / "outside/secret", O_RDONLY), EACCES, "read outside every rule");
    return f.text;
  });
  ::close(listener);
  CHECK_MESSAGE(report.empty(), report);
}

TEST_CASE("with ABI 6 signals and abstract unix sockets stop at the sandbox") {
  if (!landlock_here()) return;
  const tree t;
  const auto ruleset = prepared(t.paths());
  if (ruleset.abi() < 6) {
    psych::testing::skip_case(psych::testing::allowed_in_ci::landlock_abi_predates_feature,
                              "Landlock ABI " + std::to_string(ruleset.abi()) + " has no scopes (ABI 6)");
    return;
  }
  // An abstract unix socket of the test's own, outside the child's domain.
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(listener >= 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string name = "psych-landlock-test-" + std::to_string(::getpid());
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  REQUIRE(::bind(listener, reinterpret_cast<const sockaddr*>(&address), length) == 0);
  REQUIRE(::listen(listener, 4) == 0);

  const pid_t parent = ::getpid();
  const std::string report = in_child([&] {
    findings f;
    // Signal 0: checked exactly as a real signal, delivers nothing.
    f.expect(outcome(::kill(parent, 0)), 0, "unrestricted: kill(parent, 0)");
    f.expect(connect_outcome(AF_UNIX, &address, length), 0, "unrestricted: connect to an abstract socket");
    if (auto failed = restrict_to(ruleset); !failed.empty()) return failed;
    f.expect(outcome(::kill(parent, 0)), EPERM, "kill(parent, 0)");
    f.expect(connect_outcome(AF_UNIX, &address, length), EPERM, "connect to an abstract socket outside");
    f.expect(outcome(::kill(::getpid(), 0)), 0, "kill(self, 0)");
    return f.text;
  });
  ::close(listener);
  CHECK_MESSAGE(report.empty(), report);
}

TEST_CASE("a path that does not exist is skipped, any other failure fails") {
  if (!landlock_here()) return;
  const tree t;
  SUBCASE("missing paths are listed in skipped()") {
    auto paths = t.paths();
    paths.read_only = {t / "missing", t / "rx/file/below"};
    paths.devices.push_back(t / "no-device");
    const auto ruleset = prepared(paths);
    CHECK(ruleset.skipped() == std::vector<std::string>{t / "no-device", t / "missing", t / "rx/file/below"});
    // The rules that were added still hold.
    const std::string report = in_child([&] {
      findings f;
      if (auto failed = restrict_to(ruleset); !failed.empty()) return failed;
      f.expect(open_outcome(t / "rx/file", O_RDONLY), 0, "read under read_execute");
      f.expect(open_outcome(t / "outside/secret", O_RDONLY), EACCES, "read outside every rule");
      return f.text;
    });
    CHECK_MESSAGE(report.empty(), report);
  }
  SUBCASE("a path that cannot be resolved names the call and errno") {
    REQUIRE(::symlink("loop", (t / "loop").c_str()) == 0);
    auto paths = t.paths();
    paths.read_only = {t / "loop"};
    const auto ruleset = landlock_ruleset::prepare(paths);
    REQUIRE_FALSE(ruleset.has_value());
    CHECK(ruleset.error().stage == launch_stage::landlock);
    CHECK(ruleset.error().syscall == "open");
    CHECK(ruleset.error().error_number == ELOOP);
  }
}

TEST_CASE("describe_landlock says what that ABI handles") {
  CHECK(describe_landlock(0) == "landlock: unavailable");
  CHECK(describe_landlock(1) == "landlock: ABI 1 (filesystem)");
  CHECK(describe_landlock(3) == "landlock: ABI 3 (filesystem)");
  CHECK(describe_landlock(4) == "landlock: ABI 4 (filesystem, TCP bind/connect denied)");
  CHECK(describe_landlock(7) ==
        "landlock: ABI 7 (filesystem, TCP bind/connect denied, abstract unix sockets and signals scoped)");
  CHECK(describe_landlock(7, psych::network_access::unrestricted) ==
        "landlock: ABI 7 (filesystem, abstract unix sockets and signals scoped)");
}
