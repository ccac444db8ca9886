// The execution cgroup holds a process tree to its memory and pids limits and kills it whole,
// wherever its processes went. Making cgroups needs root and a hierarchy that lets us; a case
// that cannot run says why.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.hpp"
#include "skip.hpp"

using namespace psych::launcher;

namespace {

constexpr std::int64_t mebibyte = std::int64_t{1} << 20;
const cgroup_limits small{.memory_bytes = 64 * mebibyte, .pids = 8};

/// A fresh cgroup, or nullopt once the case is reported as skipped with the reason it cannot be made here.
std::optional<execution_cgroup> make_or_skip(const cgroup_limits& limits,
                                             std::source_location where = std::source_location::current()) {
  if (::geteuid() != 0) {
    psych::testing::skip_case("making a cgroup needs root", where);
    return std::nullopt;
  }
  auto made = execution_cgroup::create(limits);
  if (!made) FAIL(made.error().message);
  if (made.value().version() == cgroup_version::none) {
    psych::testing::skip_case("no cgroup hierarchy here lets this process make a child with memory and pids limits",
                              where);
    return std::nullopt;
  }
  return std::move(made).value();
}

std::string contents(const std::string& path) {
  std::ifstream file(path);
  std::ostringstream text;
  text << file.rdbuf();
  auto result = text.str();
  while (!result.empty() && result.back() == '\n') result.pop_back();
  return result;
}

/// Where each limit reads back, by version: {index into directories(), file}.
struct limit_file {
  std::size_t directory;
  const char* file;
};

limit_file memory_limit_file(cgroup_version version) {
  return version == cgroup_version::v2 ? limit_file{0, "memory.max"} : limit_file{0, "memory.limit_in_bytes"};
}

limit_file pids_limit_file(cgroup_version version) {
  return version == cgroup_version::v2 ? limit_file{0, "pids.max"} : limit_file{1, "pids.max"};
}

std::string read_limit(const execution_cgroup& cgroup, limit_file which) {
  return contents(cgroup.directories().at(which.directory) + "/" + which.file);
}

/// Every cgroup directory this test process made that still exists, in any hierarchy.
std::vector<std::string> our_cgroups() {
  namespace fs = std::filesystem;
  const auto prefix = "psych-" + std::to_string(::getpid()) + "-";
  std::vector<std::string> found;
  std::error_code error;
  for (fs::recursive_directory_iterator it("/sys/fs/cgroup", fs::directory_options::skip_permission_denied, error), end;
       !error && it != end; it.increment(error)) {
    if (it->is_directory(error) && it->path().filename().string().rfind(prefix, 0) == 0) found.push_back(it->path());
  }
  return found;
}

/// A child that, like the launcher's, waits for the go-ahead before it runs anything; then it
/// runs `body` and exits with what it returns.
class held_child {
 public:
  template <class Body>
  explicit held_child(Body body) {
    int go[2];
    REQUIRE(::pipe2(go, O_CLOEXEC) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::close(go[1]);
      char byte = 0;
      if (::read(go[0], &byte, 1) != 1) ::_exit(100);
      ::_exit(body());
    }
    ::close(go[0]);
    go_ = go[1];
  }
  held_child(const held_child&) = delete;
  held_child& operator=(const held_child&) = delete;
  ~held_child() {
    if (go_ >= 0) ::close(go_);
    if (!reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  pid_t pid() const { return pid_; }
  void release() {
    REQUIRE(::write(go_, "g", 1) == 1);
    ::close(go_);
    go_ = -1;
  }
  int wait() {
    int status = 0;
    REQUIRE(::waitpid(pid_, &status, 0) == pid_);
    reaped_ = true;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int go_ = -1;
  bool reaped_ = false;
};

bool killed_by_sigkill(int status) { return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL; }

}  // namespace

TEST_CASE("a new cgroup holds its limits, read back from its own directories") {
  auto cgroup = make_or_skip(small);
  if (!cgroup) return;
  const auto version = cgroup->version();
  MESSAGE("cgroup version: " << name_of_version(version));
  CHECK(name_of_version(version) != "none");
  CHECK(read_limit(*cgroup, memory_limit_file(version)) == std::to_string(64 * mebibyte));
  CHECK(read_limit(*cgroup, pids_limit_file(version)) == "8");
  const auto directories = cgroup->directories();
  // v1: memory and pids, plus cpuacct where that hierarchy exists (the child reads its CPU time).
  const std::size_t accounting = version == cgroup_version::v1 && cgroup->has_cpu_accounting() ? 1 : 0;
  CHECK(directories.size() == (version == cgroup_version::v2 ? 1u : 2u + accounting));
  const auto name = "psych-" + std::to_string(::getpid()) + "-";
  for (const auto& directory : directories) {
    INFO(directory);
    CHECK(std::filesystem::is_directory(directory));
    CHECK(std::filesystem::path(directory).filename().string().rfind(name, 0) == 0);
  }
}

TEST_CASE("a memory limit that is not a page multiple is rounded up, never down") {
  auto cgroup = make_or_skip({.memory_bytes = 64 * mebibyte + 1, .pids = 8});
  if (!cgroup) return;
  const auto page = ::sysconf(_SC_PAGESIZE);
  CHECK(read_limit(*cgroup, memory_limit_file(cgroup->version())) == std::to_string(64 * mebibyte + page));
}

TEST_CASE("a cpu quota is written and read back, and the child joins the cpu hierarchy too") {
  auto cgroup = make_or_skip({.memory_bytes = 64 * mebibyte, .pids = 8, .cpu_seconds_per_second = 0.5});
  if (!cgroup) return;
  held_child child([] { return 0; });
  REQUIRE(cgroup->attach(child.pid()));
  const auto name = std::filesystem::path(cgroup->directories().front()).filename().string();
  // Every hierarchy the child is in that has a limit of ours names our cgroup.
  std::istringstream memberships(contents("/proc/" + std::to_string(child.pid()) + "/cgroup"));
  int ours = 0;
  for (std::string line; std::getline(memberships, line);) ours += line.ends_with("/" + name) ? 1 : 0;
  // v1: memory, pids and cpu, plus cpuacct when that hierarchy exists (the tree's CPU time).
  const int accounting = cgroup->version() == cgroup_version::v1 && cgroup->cpu_seconds() ? 1 : 0;
  CHECK(ours == (cgroup->version() == cgroup_version::v2 ? 1 : 3 + accounting));
  child.release();
  CHECK(child.wait() == 0);
}

TEST_CASE("the tree's CPU time is read from the cgroup, children included") {
  auto cgroup = make_or_skip(small);
  if (!cgroup) return;
  if (!cgroup->cpu_seconds()) {
    psych::testing::skip_case("no CPU accounting hierarchy here");
    return;
  }
  const double before = *cgroup->cpu_seconds();
  held_child child([] {
    // A grandchild spins for 0.3 s of CPU: the cgroup counts it, wherever it is in the tree.
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      timespec spent{};
      do ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &spent);
      while (spent.tv_sec == 0 && spent.tv_nsec < 300'000'000);
      ::_exit(0);
    }
    ::waitpid(grandchild, nullptr, 0);
    return 0;
  });
  REQUIRE(cgroup->attach(child.pid()));
  child.release();
  CHECK(child.wait() == 0);
  const double after = *cgroup->cpu_seconds();
  CHECK(after - before >= 0.29);
  CHECK(after - before < 5.0);
}

TEST_CASE("limits that cannot be a cgroup's are refused") {
  for (const auto& limits : {cgroup_limits{.memory_bytes = 0, .pids = 8},
                             cgroup_limits{.memory_bytes = mebibyte, .pids = 0},
                             cgroup_limits{.memory_bytes = mebibyte, .pids = 8, .cpu_seconds_per_second = -1},
                             cgroup_limits{.memory_bytes = mebibyte, .pids = 8, .cpu_seconds_per_second = std::nan("")}}) {
    INFO(limits.memory_bytes << " bytes, " << limits.pids << " pids, " << limits.cpu_seconds_per_second << " cpu");
    const auto made = execution_cgroup::create(limits);
    REQUIRE_FALSE(made);
    CHECK(made.error().stage == launch_stage::cgroup);
  }
}

TEST_CASE("without the privilege to make cgroups, the answer is version none, not an error") {
  if (::geteuid() != 0) {
    psych::testing::skip_case("needs root to become another, unprivileged uid");
    return;
  }
  // In a child, so the test process keeps its uid.
  held_child child([] {
    if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) return 10;
    const auto made = execution_cgroup::create(small);
    if (!made) return 11;
    return made.value().version() == cgroup_version::none ? 0 : 12;
  });
  child.release();
  const int status = child.wait();
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("a child over the memory limit is killed, and the cgroup says the limit was hit") {
  auto cgroup = make_or_skip(small);
  if (!cgroup) return;
  held_child child([] {
    constexpr std::size_t size = 200u << 20;
    // volatile: the compiler may drop stores to memory that is never read, and the malloc with them.
    auto* memory = static_cast<volatile char*>(std::malloc(size));
    if (memory == nullptr) return 2;
    for (std::size_t at = 0; at < size; at += 4096) memory[at] = 1;
    return 0;
  });
  REQUIRE(cgroup->attach(child.pid()));
  CHECK_FALSE(cgroup->memory_limit_hit());
  child.release();
  const int status = child.wait();
  INFO("wait status " << status);
  CHECK(killed_by_sigkill(status));
  CHECK(cgroup->memory_limit_hit());
}

TEST_CASE("a child cannot fork past the pids limit") {
  auto cgroup = make_or_skip(small);
  if (!cgroup) return;
  // Exits with how many of 20 forks failed with EAGAIN (any other failure: 99).
  held_child child([] {
    std::vector<pid_t> forked;
    int refused = 0;
    for (int i = 0; i < 20; ++i) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        ::pause();
        ::_exit(0);
      }
      if (pid > 0) forked.push_back(pid);
      else if (errno == EAGAIN) ++refused;
      else return 99;
    }
    for (const pid_t pid : forked) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    return refused;
  });
  REQUIRE(cgroup->attach(child.pid()));
  child.release();
  const int status = child.wait();
  REQUIRE(WIFEXITED(status));
  // pids.max 8 holds the child and 7 of its forks.
  CHECK(WEXITSTATUS(status) == 20 - 7);
}

TEST_CASE("kill_all reaches a child that ignores SIGTERM and a grandchild that left the session") {
  auto cgroup = make_or_skip(small);
  if (!cgroup) return;
  // The orphaned grandchild comes back to us, so we can see how it ended.
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0);
  int report[2];
  REQUIRE(::pipe2(report, O_CLOEXEC) == 0);
  held_child child([&] {
    ::signal(SIGTERM, SIG_IGN);
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      ::setsid();
      const pid_t self = ::getpid();
      if (::write(report[1], &self, sizeof self) != sizeof self) ::_exit(1);
      for (;;) ::pause();
    }
    for (;;) ::pause();
    return 0;
  });
  ::close(report[1]);
  REQUIRE(cgroup->attach(child.pid()));
  child.release();
  pid_t grandchild = 0;
  REQUIRE(::read(report[0], &grandchild, sizeof grandchild) == sizeof grandchild);
  ::close(report[0]);

  CHECK(cgroup->kill_all() == 2);
  CHECK(killed_by_sigkill(child.wait()));
  int status = 0;
  REQUIRE(::waitpid(grandchild, &status, 0) == grandchild);
  CHECK(killed_by_sigkill(status));
  CHECK(contents(cgroup->directories().front() + "/cgroup.procs").empty());
  CHECK(cgroup->kill_all() == 0);
}

TEST_CASE("kill_all catches a process that keeps forking away from its pid") {
  auto cgroup = make_or_skip({.memory_bytes = 64 * mebibyte, .pids = 64});
  if (!cgroup) return;
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0);
  // Each generation forks the next and exits: the pid read in one round is dead by the next.
  held_child child([] {
    for (;;)
      if (::fork() > 0) ::_exit(0);
    return 0;
  });
  REQUIRE(cgroup->attach(child.pid()));
  child.release();
  const timespec churn{0, 20'000'000};
  ::nanosleep(&churn, nullptr);
  CHECK(cgroup->kill_all() >= 1);
  CHECK(contents(cgroup->directories().front() + "/cgroup.procs").empty());
  child.wait();
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

TEST_CASE("remove leaves no directory behind, and removing twice is fine") {
  auto cgroup = make_or_skip(small);
  if (!cgroup) return;
  held_child child([] {
    for (;;) ::pause();
    return 0;
  });
  REQUIRE(cgroup->attach(child.pid()));
  child.release();
  const auto directories = cgroup->directories();
  // A process still inside: remove() kills it first.
  const auto removed = cgroup->remove();
  REQUIRE_MESSAGE(removed, (removed ? std::string() : removed.error().message));
  CHECK(killed_by_sigkill(child.wait()));
  for (const auto& directory : directories) CHECK_FALSE(std::filesystem::exists(directory));
  CHECK(cgroup->directories().empty());
  CHECK(cgroup->remove());
  CHECK_FALSE(cgroup->attach(::getpid()));
}

TEST_CASE("a cgroup a killed launcher left behind is removed by the next one, and only that") {
  auto first = make_or_skip(small);
  if (!first) return;
  const auto parent = std::filesystem::path(first->directories().front()).parent_path().string();
  // A pid that is gone: a child that exited and was reaped.
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  const auto abandoned = fmt::format("{}/psych-{}-0", parent, gone);
  const auto alive = fmt::format("{}/psych-{}-0", parent, ::getppid());  // a launcher still running
  REQUIRE(::mkdir(abandoned.c_str(), 0755) == 0);
  REQUIRE(::mkdir(alive.c_str(), 0755) == 0);
  auto second = execution_cgroup::create(small);
  REQUIRE(second);
  CHECK_FALSE(std::filesystem::exists(abandoned));
  CHECK(std::filesystem::exists(alive));
  ::rmdir(alive.c_str());
  ::rmdir(abandoned.c_str());
}

TEST_CASE("a moved-from cgroup owns nothing; the one it moved to removes it") {
  auto cgroup = make_or_skip(small);
  if (!cgroup) return;
  const auto directories = cgroup->directories();
  {
    execution_cgroup moved = std::move(*cgroup);
    CHECK(cgroup->version() == cgroup_version::none);
    CHECK(cgroup->directories().empty());
    CHECK(moved.directories() == directories);
  }
  for (const auto& directory : directories) CHECK_FALSE(std::filesystem::exists(directory));
}

// Runs last (doctest orders cases by file and line): every case above cleaned up after itself.
TEST_CASE("no cgroup of this process is left behind") {
  if (::geteuid() != 0) {
    psych::testing::skip_case("no case made a cgroup without root");
    return;
  }
  CHECK(our_cgroups().empty());
}
