// process_count_base counts the uid's tasks as RLIMIT_NPROC does: by real uid,
// threads and zombies included, whoever /proc says owns them.
#include <doctest/doctest.h>

#include <charconv>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_host.hpp"

using namespace psych;
using namespace psych::testing;

namespace {


/// How a held process looks to the kernel.
struct shape {
  uid_t ruid, euid, suid;
  int extra_threads = 0;
  bool dumpable = true;
  bool zombie_child = false;  ///< a child that exited and is never reaped: it still counts
};

/// A process of the test's making that keeps its shape until destroyed.
class held_process {
 public:
  explicit held_process(const shape& s) {
    int ready[2];
    REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::close(ready[0]);
      if (::setresuid(s.ruid, s.euid, s.suid) != 0) ::_exit(1);
      if (s.zombie_child && ::fork() == 0) ::_exit(0);
      // Any euid change left the process non-dumpable; set what the shape asks for.
      if (::prctl(PR_SET_DUMPABLE, s.dumpable ? 1 : 0, 0, 0, 0) != 0) ::_exit(1);
      for (int i = 0; i < s.extra_threads; ++i) std::thread([] { ::pause(); }).detach();
      (void)!::write(ready[1], "x", 1);
      for (;;) ::pause();
    }
    ::close(ready[1]);
    char byte = 0;
    const bool up = ::read(ready[0], &byte, 1) == 1;
    ::close(ready[0]);
    REQUIRE(up);
  }
  ~held_process() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  held_process(const held_process&) = delete;
  held_process& operator=(const held_process&) = delete;
  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

uid_t proc_owner(pid_t pid, const std::string& entry = "") {
  struct stat st {};
  REQUIRE(::stat(("/proc/" + std::to_string(pid) + entry).c_str(), &st) == 0);
  return st.st_uid;
}

/// The reference count: every /proc/<pid>/status, real uid and thread count.
std::int64_t tasks_by_real_uid(uid_t uid) {
  std::int64_t tasks = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const auto name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream status(entry.path() / "status");
    std::int64_t real = -1, threads = 0;
    for (std::string line; std::getline(status, line);) {
      std::istringstream fields(line);
      std::string key;
      fields >> key;
      if (key == "Uid:") fields >> real;
      if (key == "Threads:") fields >> threads;
    }
    if (real == static_cast<std::int64_t>(uid)) tasks += threads;
  }
  return tasks;
}

}  // namespace

TEST_CASE("process_count_base counts by real uid, whoever /proc names as the owner") {
  if (!have_root()) return;
  // Uids of this test's own, so no other test's processes move the count.
  const auto uid = static_cast<uid_t>(test_uid + 321), other = static_cast<uid_t>(test_uid + 322);
  held_process plain({.ruid = uid, .euid = uid, .suid = uid});
  held_process threaded({.ruid = uid, .euid = uid, .suid = uid, .extra_threads = 2});
  held_process hidden({.ruid = uid, .euid = uid, .suid = uid, .dumpable = false});  // its files say root
  held_process setuid_like({.ruid = uid, .euid = other, .suid = uid});  // /proc says `other`
  held_process with_zombie({.ruid = uid, .euid = uid, .suid = uid, .zombie_child = true});
  held_process saved_only({.ruid = other, .euid = other, .suid = uid});  // real uid other: not counted
  held_process effective_only({.ruid = other, .euid = uid, .suid = other});  // /proc says uid: not counted
  // The shapes an owner-based filter gets wrong really are there: /proc/<pid> is owned by the
  // effective uid, the files in it by root when the process is not dumpable.
  REQUIRE(proc_owner(hidden.pid(), "/status") == 0);
  REQUIRE(proc_owner(setuid_like.pid()) == other);
  REQUIRE(proc_owner(effective_only.pid()) == uid);
  const std::int64_t expected = 1 + 3 + 1 + 1 + 2;
  REQUIRE(tasks_by_real_uid(uid) == expected);

  scratch dir;
  auto launch = default_launch(dir);
  launch.run_as = protocol::identity{uid, uid};
  launch.limits.process_count = 4;
  const auto outcome = run_program(launch, "return 1");
  REQUIRE_MESSAGE(outcome.started, (outcome.error ? outcome.error->message : "no reply"));
  CHECK(outcome.started->mechanisms.process_count_base == expected);
  CHECK(outcome.started->mechanisms.rlimits.process_count == 4 + expected);
  REQUIRE(outcome.done);
  CHECK(parse_json(*outcome.done)["ok"].GetBool());
}
