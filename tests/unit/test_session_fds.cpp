// A session that cannot start leaves no descriptor behind, whichever step ran out of them.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

#include <filesystem>
#include <stop_token>
#include <string>
#include <vector>

#include "execution/session.hpp"
#include "temp_dir.hpp"

using namespace psych;

namespace {

/// RLIMIT_NOFILE bounds descriptor numbers, not their count: a hole below the highest open
/// descriptor (one the test runner's parent left open, say) would give every step a spare it
/// was not meant to have. Filling the holes makes "n spare" mean exactly n.
class holes_filled {
 public:
  holes_filled() {
    int highest = -1;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
      highest = std::max(highest, std::stoi(entry.path().filename().string()));
    for (int fd = 0; fd < highest; ++fd)
      if (::fcntl(fd, F_GETFD) < 0) {
        const int filler = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (filler >= 0 && filler < highest) fillers_.push_back(filler);
        else if (filler >= 0) ::close(filler);
      }
  }
  ~holes_filled() {
    for (int fd : fillers_) ::close(fd);
  }
  holes_filled(const holes_filled&) = delete;
  holes_filled& operator=(const holes_filled&) = delete;

 private:
  std::vector<int> fillers_;
};

std::size_t open_descriptors() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n - 1;  // the directory_iterator's own
}

/// Runs `body` with at most `limit` descriptors open in this process, then restores the limit.
template <class Body>
void with_descriptor_limit(rlim_t limit, Body body) {
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
  rlimit lowered = saved;
  lowered.rlim_cur = limit;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &lowered) == 0);
  body();
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &saved) == 0);
}

}  // namespace

TEST_CASE("session: a launch that fails at any step leaves no descriptor open") {
  const psych::testing::temp_dir root("psych-session-fds");
  host::session_plan plan;
  plan.launcher_path = (root.path() / "no-such-launcher").string();  // the last step fails too
  plan.interpreter = "/usr/bin/python3";
  plan.temp_root = root.path().string();
  const holes_filled filled;
  const auto before = open_descriptors();
  // From no descriptor to spare up to more than launch() needs (two listeners, two socket
  // pairs, two pipes, the event loop's own), so that each of its steps is the one to fail.
  for (std::size_t spare = 0; spare <= 24; ++spare) {
    CAPTURE(spare);
    host::session_outcome outcome;
    with_descriptor_limit(static_cast<rlim_t>(before + spare), [&] { outcome = host::run_session(plan, {}); });
    REQUIRE(outcome.result.failure);
    CHECK(outcome.result.failure->kind == failure_kind::launch_failed);
    CHECK_FALSE(outcome.program_started);
    CHECK(open_descriptors() == before);
    CHECK(std::filesystem::is_empty(root.path()));  // and no execution directory
  }
}
