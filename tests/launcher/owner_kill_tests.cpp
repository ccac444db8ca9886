// The sweep's last resort (launchers/linux/owner_kill.hpp, launchers/posix/tree_sweep.cpp): one
// kill(-1, SIGKILL) as the execution's own uid ends chains of processes that fork and exit, which
// a scan of /proc is always a generation behind; and kill_tree turns to it only when a round of the
// scan's kills left something.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "owner_kill.hpp"
#include "test_host.hpp"
#include "tree_sweep.hpp"

using namespace psych;
using namespace psych::testing;
using namespace psych::launcher;

namespace {

/// `chains` chains of processes running as `uid`, each link forking its successor and exiting at
/// once (so a scan of /proc often sees none of them), counting its generation in memory shared
/// with the test. Under a keeper of the test's (a subreaper, which reaps every link and ends when
/// its pipe closes and nothing of its own is left).
class fork_chains {
 public:
  fork_chains(uid_t uid, int chains) : uid_(uid) {
    void* shared = ::mmap(nullptr, sizeof(std::atomic<long>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(shared != MAP_FAILED);
    links_ = new (shared) std::atomic<long>(0);
    int pipe_ends[2];
    REQUIRE(::pipe2(pipe_ends, O_CLOEXEC) == 0);
    keeper_ = ::fork();
    REQUIRE(keeper_ >= 0);
    if (keeper_ == 0) {
      ::close(pipe_ends[1]);
      ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
      for (int i = 0; i < chains; ++i)
        if (::fork() == 0) {
          if (::setgroups(0, nullptr) != 0 || ::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0)
            ::_exit(1);
          for (;;) {
            links_->fetch_add(1);
            if (::fork() != 0) ::_exit(0);  // the parent goes, the child carries on (a failed fork: again)
          }
        }
      ::fcntl(pipe_ends[0], F_SETFL, O_NONBLOCK);
      for (;;) {
        while (::waitpid(-1, nullptr, WNOHANG) > 0) {
        }
        char byte;
        const bool told_to_end = ::read(pipe_ends[0], &byte, 1) == 0;
        if (told_to_end && ::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD) ::_exit(0);
        ::usleep(1000);
      }
    }
    ::close(pipe_ends[0]);
    end_ = pipe_ends[1];
  }
  ~fork_chains() {
    ::close(end_);
    // Whatever the case found, nothing of the chains may outlive it: killed here by the same
    // means written out again (a uid change and kill(-1)), until the keeper has none left.
    for (int attempt = 0; attempt < 500; ++attempt) {
      if (::waitpid(keeper_, nullptr, WNOHANG) == keeper_) break;
      if (attempt % 50 == 49) {
        const pid_t killer = ::fork();
        if (killer == 0) {
          if (::setgroups(0, nullptr) == 0 && ::setresgid(uid_, uid_, uid_) == 0 && ::setresuid(uid_, uid_, uid_) == 0)
            ::kill(-1, SIGKILL);
          ::_exit(0);
        }
        if (killer > 0) ::waitpid(killer, nullptr, 0);
      }
      std::this_thread::sleep_for(10ms);
    }
    ::munmap(links_, sizeof(std::atomic<long>));
  }
  fork_chains(const fork_chains&) = delete;
  fork_chains& operator=(const fork_chains&) = delete;

  /// Whether a link was born within `span`.
  [[nodiscard]] bool growing(std::chrono::milliseconds span) const {
    const long before = links_->load();
    std::this_thread::sleep_for(span);
    return links_->load() != before;
  }

 private:
  uid_t uid_;
  std::atomic<long>* links_ = nullptr;
  pid_t keeper_ = -1;
  int end_ = -1;
};

/// A finder that sees what the test says, counts the owner's kills, and sees nothing after one.
struct scripted_finder final : descendant_finder {
  std::vector<process_seen> seen;
  int owner_kills = 0;
  [[nodiscard]] bool adopts_orphans() const override { return false; }
  std::vector<process_seen> descendants() override { return owner_kills > 0 ? std::vector<process_seen>{} : seen; }
  bool signal_exactly(const process_seen&, int) override { return false; }
  bool kill_by_owner() override {
    ++owner_kills;
    return true;
  }
};

}  // namespace

TEST_CASE("owner kill: one kill(-1) as the execution's uid ends chains that fork faster than any scan") {
  if (!have_root()) return;
  const auto uid = static_cast<uid_t>(test_uid + 331);
  fork_chains chains(uid, 8);
  // The chains run and keep running: the control, without which the kill's result means nothing.
  REQUIRE(chains.growing(300ms));
  REQUIRE(chains.growing(300ms));

  CHECK(kill_every_process_of(identity_plan{.uid = uid, .gid = uid, .drop = true}));
  // No link is born after the kill: none outran it.
  std::this_thread::sleep_for(50ms);  // links already signalled finish dying
  CHECK_FALSE(chains.growing(500ms));
}

TEST_CASE("owner kill: never without a dropped, non-root identity") {
  CHECK_FALSE(kill_every_process_of(identity_plan{.uid = 0, .gid = 0, .drop = true}));
  CHECK_FALSE(kill_every_process_of(identity_plan{.uid = static_cast<uid_t>(test_uid + 332),
                                                  .gid = static_cast<gid_t>(test_uid + 332),
                                                  .drop = false}));
}

TEST_CASE("kill_tree: with a child left, the owner's kill comes first, before any scan") {
  const signal_source wake{-1, [](int) { return signals_seen{}; }};
  // A child of this process's, as the interpreter's orphans are the launcher's: it waits forever.
  const pid_t left = ::fork();
  REQUIRE(left >= 0);
  if (left == 0) {
    for (;;) ::pause();
  }
  struct adopting final : descendant_finder {
    pid_t child = 0;
    int scans = 0, owner_kills = 0, scans_before_owner_kill = -1;
    [[nodiscard]] bool adopts_orphans() const override { return true; }
    std::vector<process_seen> descendants() override {
      ++scans;
      return {};
    }
    bool signal_exactly(const process_seen&, int) override { return false; }
    bool kill_by_owner() override {
      ++owner_kills;
      scans_before_owner_kill = scans;
      return ::kill(child, SIGKILL) == 0;  // what kill(-1) as the child's uid would do to it
    }
  } finder;
  finder.child = left;
  child_exit exit;
  const auto sweep = kill_tree(left, exit, wake, finder, 5s);
  CHECK(finder.owner_kills == 1);
  CHECK(finder.scans_before_owner_kill == 0);
  CHECK(sweep.survivors == 0);
  CHECK(exit.reaped);  // reaped by the sweep, which the kill left nothing else to do
  CHECK(WIFSIGNALED(exit.status));
}

TEST_CASE("kill_tree: where orphans go elsewhere, the owner's kill once a round of the scan's kills left something") {
  const signal_source wake{-1, [](int) { return signals_seen{}; }};  // no SIGCHLD: each round waits 10 ms
  child_exit exit;
  SUBCASE("a tree the first scan finds empty: no owner's kill") {
    scripted_finder finder;
    const auto sweep = kill_tree(0, exit, wake, finder, 1s);
    CHECK(finder.owner_kills == 0);
    CHECK(sweep.survivors == 0);
  }
  SUBCASE("a process the scans keep seeing: the owner's kill, once, and the tree is gone") {
    scripted_finder finder;
    finder.seen = {{.pid = 999'999'999, .start_time = 1}};
    const auto sweep = kill_tree(0, exit, wake, finder, 5s);
    CHECK(finder.owner_kills == 1);
    CHECK(sweep.survivors == 0);
  }
  SUBCASE("an owner's kill that cannot be had: the sweep gives up at its patience, and says so") {
    struct blind final : descendant_finder {
      int owner_kills = 0;
      [[nodiscard]] bool adopts_orphans() const override { return false; }
      std::vector<process_seen> descendants() override { return {{.pid = 999'999'999, .start_time = 1}}; }
      bool signal_exactly(const process_seen&, int) override { return false; }
      bool kill_by_owner() override {
        ++owner_kills;
        return false;
      }
    } finder;
    const auto sweep = kill_tree(0, exit, wake, finder, 100ms);
    CHECK(finder.owner_kills == 1);  // tried once, not every round
    CHECK(sweep.survivors == 1);
  }
}
