// The parts of the macOS launcher that are plain POSIX or pure, compiled and run here on every
// POSIX platform: which processes count as the program's, the self-pipe the launcher's signals
// arrive on, the unlinked bootstrap file, the paths the seatbelt profile is built from, and the
// identity drop that cannot read the saved ids back, and the descriptor marking macOS needs
// without close_range. What only macOS has (sysctl's process table,
// sandbox_init) runs in the macOS CI job (docs/macos-launcher.md).
#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bootstrap_fd.hpp"
#include "confinement.hpp"
#include "descendant_selection.hpp"
#include "fds.hpp"
#include "identity.hpp"
#include "signals.hpp"
#include "skip.hpp"

using namespace psych;
using namespace psych::launcher;

namespace {

std::vector<pid_t> pids_of(const std::vector<process_entry>& entries) {
  std::vector<pid_t> pids;
  for (const auto& entry : entries) pids.push_back(entry.pid);
  std::sort(pids.begin(), pids.end());
  return pids;
}

constexpr uid_t program_uid = 1'500'007;

/// launchd (1), the launcher (100, root), the interpreter (200, its own group), a grandchild, an
/// orphan still in the interpreter's group, a daemon that left the session as the program's uid,
/// and an unrelated process of root.
std::vector<process_entry> sample_table() {
  return {{.pid = 1, .ppid = 0, .pgid = 1, .ruid = 0},
          {.pid = 100, .ppid = 50, .pgid = 100, .ruid = 0},
          {.pid = 200, .ppid = 100, .pgid = 200, .ruid = program_uid},
          {.pid = 201, .ppid = 200, .pgid = 200, .ruid = program_uid, .dead = true},
          {.pid = 301, .ppid = 1, .pgid = 200, .ruid = program_uid},
          {.pid = 302, .ppid = 1, .pgid = 302, .ruid = program_uid},
          {.pid = 400, .ppid = 1, .pgid = 400, .ruid = 0}};
}

/// A temporary directory, removed with everything in it.
struct scratch_dir {
  std::filesystem::path path;
  scratch_dir() {
    std::string name = (std::filesystem::temp_directory_path() / "psych-macos-parts-XXXXXX").string();
    REQUIRE(::mkdtemp(name.data()) != nullptr);
    path = std::filesystem::canonical(name);
  }
  ~scratch_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

}  // namespace

TEST_CASE("the program's processes: parent chain, the interpreter's group, and an exclusive uid") {
  const auto table = sample_table();
  SUBCASE("before the interpreter exists: only the parent chain") {
    CHECK(pids_of(select_descendants(table, {.launcher = 100})) == std::vector<pid_t>{200, 201});
  }
  SUBCASE("the interpreter's group finds an orphan that stayed in it") {
    CHECK(pids_of(select_descendants(table, {.launcher = 100, .group = 200})) == std::vector<pid_t>{200, 201, 301});
  }
  SUBCASE("a uid the execution holds alone finds the daemon that left the session") {
    CHECK(pids_of(select_descendants(table, {.launcher = 100, .group = 200, .exclusive_uid = program_uid})) ==
          std::vector<pid_t>{200, 201, 301, 302});
  }
  SUBCASE("never the launcher, launchd or pid 0, whatever their uid") {
    CHECK(pids_of(select_descendants(table, {.launcher = 100, .group = 200, .exclusive_uid = 0})) ==
          std::vector<pid_t>{200, 201, 301, 400});
  }
  SUBCASE("a cycle in a racy table ends the walk") {
    const std::vector<process_entry> cycle = {{.pid = 500, .ppid = 501}, {.pid = 501, .ppid = 500}};
    CHECK(select_descendants(cycle, {.launcher = 100}).empty());
  }
}

TEST_CASE("the self-pipe: a signal before poll() still wakes it, and says which kind") {
  auto source = open_signal_source();
  REQUIRE(source);
  const auto wait_readable = [&] {
    pollfd readable{source.value().fd, POLLIN, 0};
    return ::poll(&readable, 1, 1000) == 1;
  };
  REQUIRE(::raise(SIGCHLD) == 0);
  CHECK(wait_readable());
  auto seen = source.value().drain();
  CHECK(seen.child);
  CHECK_FALSE(seen.termination);
  REQUIRE(::raise(SIGHUP) == 0);
  CHECK(wait_readable());
  seen = source.value().drain();
  CHECK(seen.termination);
  CHECK_FALSE(seen.child);
  // Drained: nothing is left to wake on.
  pollfd idle{source.value().fd, POLLIN, 0};
  CHECK(::poll(&idle, 1, 0) == 0);
  CHECK((::fcntl(source.value().fd, F_GETFD) & FD_CLOEXEC) != 0);
  // This process goes on running other cases: its dispositions go back to the defaults.
  for (const int signal : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGPIPE}) std::signal(signal, SIG_DFL);
  ::close(source.value().fd);
}

TEST_CASE("the bootstrap file: what was written, read-only, with no name left") {
  const std::vector<unsigned char> blob = {'p', 's', 'y', 'c', 'h', 0, 1, 2, 255};
  auto sealed = seal_bootstrap(blob);
  REQUIRE(sealed);
  const int fd = sealed.value().get();
  struct stat status {};
  REQUIRE(::fstat(fd, &status) == 0);
  CHECK(status.st_nlink == 0);  // unlinked: nothing can open it again by name
  CHECK(static_cast<std::size_t>(status.st_size) == blob.size());
  CHECK((::fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY);
  CHECK((::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
  CHECK(::write(fd, "x", 1) == -1);
  std::vector<unsigned char> read_back(blob.size() + 1);
  CHECK(::pread(fd, read_back.data(), read_back.size(), 0) == static_cast<ssize_t>(blob.size()));
  read_back.resize(blob.size());
  CHECK(read_back == blob);
}

TEST_CASE("the seatbelt terms: canonical paths, the secrets' subtrees, the interpreter reopened") {
  scratch_dir scratch;
  const auto root = scratch.path / "root";
  for (const auto& dir : {root / "psych-a" / "workspace", root / "psych-a" / "tmp", root / "psych-canary-a",
                          root / "bin"})
    std::filesystem::create_directories(dir);
  std::ofstream(root / "psych-canary-a" / "canary") << "canary\n";
  std::ofstream(root / "bin" / "python3") << "";
  std::filesystem::create_directory_symlink(root, scratch.path / "link");  // as /tmp is /private/tmp on macOS

  protocol::launch_frame launch;
  const auto via_link = scratch.path / "link";
  launch.workspace = (via_link / "psych-a" / "workspace").string();
  launch.tmp_dir = (via_link / "psych-a" / "tmp").string();
  launch.canary = (via_link / "psych-canary-a" / "canary").string();
  launch.interpreter = (via_link / "bin" / "python3").string();

  auto terms = seatbelt_terms_for(launch);
  REQUIRE(terms);
  CHECK(terms.value().workspace == (root / "psych-a" / "workspace").string());
  CHECK(terms.value().tmp_dir == (root / "psych-a" / "tmp").string());
  const auto& denied = terms.value().read_denied;
  const auto denies = [&](const std::string& path) { return std::find(denied.begin(), denied.end(), path) != denied.end(); };
  CHECK(denies("/Users"));
  CHECK(denies(root.string()));                               // the temp root: every other execution
  CHECK(denies((root / "psych-canary-a").string()));          // the canary's directory
  CHECK(terms.value().read_reopened == std::vector<std::string>{root.string()});  // <root>/bin/python3's prefix
  CHECK_FALSE(terms.value().network);
  auto profile = seatbelt_profile(terms.value());
  CHECK(profile);

  SUBCASE("a path that does not resolve is refused before the fork") {
    launch.canary = (via_link / "nowhere" / "canary").string();
    const auto refused = seatbelt_terms_for(launch);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().stage == launch_stage::seatbelt);
    CHECK(refused.error().syscall == "realpath");
  }
}

TEST_CASE("the identity drop without setresuid: every id set, and root cannot be taken back") {
  if (::geteuid() != 0) {
    testing::skip_case("the drop needs root: run as root, as CI does");
    return;
  }
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const identity_plan plan{.uid = program_uid, .gid = program_uid, .drop = true};
    if (!become(plan)) ::_exit(1);
    const bool dropped = ::getuid() == program_uid && ::geteuid() == program_uid && ::getgid() == program_uid &&
                         ::getegid() == program_uid && ::setuid(0) != 0;
    ::_exit(dropped ? 0 : 2);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("without close_range, the listing of /dev/fd marks every descriptor from the first up") {
  // As in the child: a descriptor below the first stays inheritable, each one from it up is marked.
  const int below = ::open("/dev/null", O_RDONLY);
  REQUIRE(below >= 0);
  std::vector<int> above;
  for (int i = 0; i < 3; ++i) {
    const int fd = ::fcntl(below, F_DUPFD, below + 1);
    REQUIRE(fd > below);
    above.push_back(fd);
  }
  REQUIRE(mark_listed_close_on_exec_from(below + 1));
  CHECK((::fcntl(below, F_GETFD) & FD_CLOEXEC) == 0);
  for (const int fd : above) {
    CAPTURE(fd);
    CHECK((::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
    ::close(fd);
  }
  ::close(below);
}
