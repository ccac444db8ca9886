// Who the sandbox's child runs as: whether that identity can reach an interpreter, decided from
// stat facts and ACLs (src/host/os/path_access), and the per-execution uid pool
// (src/host/backends/uid_pool): one holder per uid across threads and processes, a named refusal when the
// range is exhausted, reuse only after release, strays skipped, leftovers swept.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include <memory>
#include <string_view>
#include <vector>

#include "execution/execution_dirs.hpp"
#include "backends/local/interpreter.hpp"
#include "os/path_access.hpp"
#include "skip.hpp"
#include "temp_dir.hpp"
#include "psych/host/sandbox.hpp"
#include "backends/uid_pool.hpp"

using namespace psych;
using namespace psych::host;

namespace {

bool is_root() { return ::geteuid() == 0; }

file_facts dir(std::string path, std::uint32_t mode, std::int64_t owner = 0, std::int64_t group = 0) {
  return {.path = std::move(path), .directory = true, .mode = mode, .owner = owner, .group = group, .acl = {}};
}

file_facts binary(std::string path, std::uint32_t mode, std::int64_t owner = 0, std::int64_t group = 0) {
  return {.path = std::move(path), .directory = false, .mode = mode, .owner = owner, .group = group, .acl = {}};
}

const accessor sandbox_uid{1'500'000, {1'500'000}};

/// The steps of /root/.pyenv/versions/3.11.7/bin/python3.11 with /root at `root_mode`.
std::vector<access_step> pyenv_steps(std::uint32_t root_mode) {
  return {{dir("/", 0755), may_execute},
          {dir("/root", root_mode), may_execute},
          {dir("/root/.pyenv", 0755), may_execute},
          {dir("/root/.pyenv/versions", 0755), may_execute},
          {dir("/root/.pyenv/versions/3.11.7", 0755), may_execute},
          {dir("/root/.pyenv/versions/3.11.7/bin", 0755), may_execute},
          {binary("/root/.pyenv/versions/3.11.7/bin/python3.11", 0755), may_execute},
          {dir("/root/.pyenv/versions/3.11.7/lib", 0755), may_execute},
          {dir("/root/.pyenv/versions/3.11.7/lib/python3.11", 0755), may_read | may_execute}};
}

/// A child process that runs as `uid` until it is killed: a live process of that uid.
class process_of_uid {
 public:
  explicit process_of_uid(std::int64_t uid) {
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      if (::setresgid(static_cast<gid_t>(uid), static_cast<gid_t>(uid), static_cast<gid_t>(uid)) != 0 ||
          ::setresuid(static_cast<uid_t>(uid), static_cast<uid_t>(uid), static_cast<uid_t>(uid)) != 0)
        ::_exit(1);
      for (;;) ::pause();
    }
    // Until the kernel shows the new uid, a pool could not know of it.
    for (int i = 0; i < 200; ++i) {
      const auto ids = ids_in_use();
      if (std::binary_search(ids.begin(), ids.end(), uid)) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL("the child never showed uid " << uid);
  }
  process_of_uid(const process_of_uid&) = delete;
  process_of_uid& operator=(const process_of_uid&) = delete;
  ~process_of_uid() { end(); }
  void end() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

}  // namespace

TEST_CASE("reachability: a 0700 directory owned by root stops the sandbox's uid, and the sentence says where") {
  const auto denial = first_denial(pyenv_steps(0700), sandbox_uid);
  REQUIRE(denial);
  CHECK(*denial == "/root is mode 0700, owner 0, group 0, which gives uid 1500000 --- where it needs to search it");
  CHECK_FALSE(first_denial(pyenv_steps(0711), sandbox_uid));  // search is all the path needs
  CHECK_FALSE(first_denial(pyenv_steps(0700), accessor{0, {0}}));  // root owns it (not an override)
}

TEST_CASE("reachability: the owner, group and other classes, first match decides") {
  SUBCASE("the owner class, even when others would get more") {
    CHECK(granted_bits(dir("/d", 0077, 1'500'000), sandbox_uid) == 0u);
  }
  SUBCASE("the group class for a member") {
    CHECK(granted_bits(dir("/d", 0750, 0, 1'500'000), sandbox_uid) == 5u);
    CHECK(granted_bits(dir("/d", 0705, 0, 1'500'000), sandbox_uid) == 0u);  // a member never falls to other
  }
  SUBCASE("other for everyone else") { CHECK(granted_bits(dir("/d", 0751), sandbox_uid) == 1u); }
  SUBCASE("a binary must be executable, a stdlib directory listable") {
    auto steps = pyenv_steps(0755);
    steps[6].facts.mode = 0744;
    const auto denial = first_denial(steps, sandbox_uid);
    REQUIRE(denial);
    CHECK(denial->find("python3.11 is mode 0744") != std::string::npos);
    CHECK(denial->find("needs to execute it") != std::string::npos);
    steps = pyenv_steps(0755);
    steps[8].facts.mode = 0711;
    const auto listing = first_denial(steps, sandbox_uid);
    REQUIRE(listing);
    CHECK(listing->find("lib/python3.11 is mode 0711") != std::string::npos);
    CHECK(listing->find("list and search") != std::string::npos);
  }
}

TEST_CASE("reachability: a POSIX ACL decides over the mode's group bits") {
  auto root = dir("/root", 0700);
  SUBCASE("a named-user entry grants search, within the mask") {
    root.acl = {{acl_entry::user_obj, 7, 0}, {acl_entry::user, 1, 1'500'000}, {acl_entry::group_obj, 0, 0},
                {acl_entry::mask, 1, 0}, {acl_entry::other, 0, 0}};
    CHECK_FALSE(first_denial({{root, may_execute}}, sandbox_uid));
  }
  SUBCASE("the mask takes it away again") {
    root.acl = {{acl_entry::user_obj, 7, 0}, {acl_entry::user, 7, 1'500'000}, {acl_entry::group_obj, 0, 0},
                {acl_entry::mask, 4, 0}, {acl_entry::other, 0, 0}};
    const auto denial = first_denial({{root, may_execute}}, sandbox_uid);
    REQUIRE(denial);
    CHECK(denial->find("with an ACL") != std::string::npos);
  }
  SUBCASE("a named group entry of a group the uid holds") {
    root.acl = {{acl_entry::user_obj, 7, 0}, {acl_entry::group_obj, 0, 0}, {acl_entry::group, 5, 1'500'000},
                {acl_entry::mask, 5, 0}, {acl_entry::other, 0, 0}};
    CHECK_FALSE(first_denial({{root, may_read | may_execute}}, sandbox_uid));
  }
  SUBCASE("two group entries that each grant half do not add up, as in the kernel") {
    root.acl = {{acl_entry::user_obj, 7, 0}, {acl_entry::group_obj, 4, 0}, {acl_entry::group, 1, 1'500'000},
                {acl_entry::mask, 7, 0}, {acl_entry::other, 7, 0}};
    const accessor in_both{1'500'000, {0, 1'500'000}};
    CHECK(first_denial({{root, may_read | may_execute}}, in_both));
    CHECK_FALSE(first_denial({{root, may_execute}}, in_both));
  }
}

TEST_CASE("reachability: what an interpreter needs, in walking order, each path once") {
  const auto needs = interpreter_needs("/opt/py/bin/python3.12", {"/opt/py/lib/python3.12"});
  const std::vector<std::pair<std::string, unsigned>> expected{
      {"/", may_execute},         {"/opt", may_execute},
      {"/opt/py", may_execute},   {"/opt/py/bin", may_execute},
      {"/opt/py/bin/python3.12", may_execute}, {"/opt/py/lib", may_execute},
      {"/opt/py/lib/python3.12", may_read | may_execute}};
  CHECK(needs == expected);
}

TEST_CASE("reachability: read off the filesystem, a directory this process made 0700 is denied to another uid") {
  psych::testing::temp_dir scratch("psych-reach-test");
  const auto inner = scratch.file("closed");
  REQUIRE(::mkdir(inner.c_str(), 0700) == 0);
  const auto facts = read_file_facts(inner);
  REQUIRE(facts.facts);
  CHECK(facts.facts->mode == 0700u);
  CHECK(facts.facts->owner == static_cast<std::int64_t>(::geteuid()));
  const accessor stranger{static_cast<std::int64_t>(::geteuid()) + 1'000'000, {4'000'000}};
  const auto denial = first_denial({{*facts.facts, may_execute}}, stranger);
  REQUIRE(denial);
  CHECK(denial->find(inner + " is mode 0700") != std::string::npos);
  CHECK_FALSE(read_file_facts(inner + "/missing").facts);
}

TEST_CASE("interpreter choice: one the child's uid cannot reach is refused by name, or skipped with a note") {
  // The worker owns the closed directory; the child is another uid, as a root worker's is.
  psych::testing::temp_dir scratch("psych-reach-test");
  const auto closed = scratch.file("home");
  const auto prefix = closed + "/py";
  const auto copy = prefix + "/bin/python3";
  const auto real = std::filesystem::canonical("/usr/bin/python3");
  std::filesystem::create_directories(prefix + "/bin");
  std::filesystem::create_directories(prefix + "/lib/" + real.filename().string());
  std::filesystem::copy_file(real, copy);
  REQUIRE(::chmod(scratch.path().c_str(), 0755) == 0);  // mkdtemp's 0700 would stop the walk first
  REQUIRE(::chmod(closed.c_str(), 0700) == 0);
  const accessor child{static_cast<std::int64_t>(::geteuid()) + 1'000'000, {4'000'000}};
  const auto who = std::to_string(child.uid);

  auto named = resolve_interpreter(copy, child);
  REQUIRE_FALSE(named);
  CHECK(named.error().kind == error_kind::interpreter_unavailable);
  const auto message = named.error().message();
  INFO(message);
  CHECK(message.find(prefix + " is not reachable by uid " + who) != std::string::npos);
  CHECK(message.find(closed + " is mode 0700") != std::string::npos);
  CHECK(message.find("set python_bin to /usr/bin/python3 or put the interpreter where uid " + who) !=
        std::string::npos);

  const std::string saved = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", (prefix + "/bin:/usr/bin:/bin").c_str(), 1);
  auto chosen = resolve_interpreter(std::nullopt, child);
  ::setenv("PATH", saved.c_str(), 1);
  REQUIRE(chosen);
  CHECK(chosen.value().path == real.string());
  REQUIRE(chosen.value().notes.size() == 1);
  CHECK(chosen.value().notes[0].find("interpreter: skipped " + copy + ": " + prefix + " is not reachable") !=
        std::string::npos);

  auto own = resolve_interpreter(copy, accessor{static_cast<std::int64_t>(::geteuid()), {}});
  CHECK(own);  // its owner reaches it: nothing but reachability was in the way
}

// ---- the uid pool ---------------------------------------------------------------------------

namespace {

/// Far from the suites' uids, in a lock directory of the test's own.
constexpr std::int64_t pool_first = 1'700'000;

uid_range range_in(const psych::testing::temp_dir& dir, std::int64_t count, std::int64_t first = pool_first) {
  return {.first = first, .count = count, .lock_dir = dir.file("uids")};
}

}  // namespace

TEST_CASE("uid pool: a range of one exhausts with a named refusal, and the uid is reused only after release") {
  psych::testing::temp_dir scratch("psych-uid-pool");
  auto pool = uid_pool::per_execution(range_in(scratch, 1));
  REQUIRE(pool);
  auto first = pool.value()->acquire();
  REQUIRE(first);
  CHECK(first.value().identity().uid == pool_first);
  CHECK(first.value().identity().gid == pool_first);
  auto second = pool.value()->acquire();
  REQUIRE_FALSE(second);
  CHECK(second.error().kind == error_kind::sandbox_setup);
  CHECK(second.error().message().find("run_as_range 1700000..1700000 is exhausted: 1 uid(s) held") !=
        std::string::npos);
  const auto busy = pool.value()->report();
  CHECK(busy.free == 0);
  CHECK(busy.held == 1);
  CHECK_FALSE(first.value().release());
  const auto idle = pool.value()->report();
  CHECK(idle.free == 1);
  CHECK(idle.held == 0);
  auto third = pool.value()->acquire();
  REQUIRE(third);
  CHECK(third.value().identity().uid == pool_first);
}

TEST_CASE("uid pool: the least recently handed out uid comes next") {
  psych::testing::temp_dir scratch("psych-uid-pool");
  auto pool = uid_pool::per_execution(range_in(scratch, 3));
  REQUIRE(pool);
  std::vector<std::int64_t> order;
  for (int i = 0; i < 4; ++i) {
    auto lease = pool.value()->acquire();
    REQUIRE(lease);
    order.push_back(lease.value().identity().uid);
  }  // each released at the end of its iteration
  CHECK(order == std::vector<std::int64_t>{pool_first, pool_first + 1, pool_first + 2, pool_first});
}

TEST_CASE("uid pool: threads acquiring at once each get a uid of their own") {
  psych::testing::temp_dir scratch("psych-uid-pool");
  constexpr int threads = 8;
  auto pool = uid_pool::per_execution(range_in(scratch, threads));
  REQUIRE(pool);
  std::vector<std::optional<uid_lease>> leases(threads);
  {
    std::vector<std::jthread> workers;
    for (int i = 0; i < threads; ++i)
      workers.emplace_back([&, i] {
        auto lease = pool.value()->acquire();
        if (lease) leases[static_cast<std::size_t>(i)].emplace(std::move(lease).value());
      });
  }
  std::set<std::int64_t> uids;
  for (const auto& lease : leases) {
    REQUIRE(lease);
    uids.insert(lease->identity().uid);
  }
  CHECK(uids.size() == threads);
  CHECK_FALSE(pool.value()->acquire());  // all eight held
}

TEST_CASE("uid pool: another process on the host holding the uid is respected") {
  psych::testing::temp_dir scratch("psych-uid-pool");
  const auto range = range_in(scratch, 1);
  REQUIRE(uid_pool::per_execution(range));  // makes the lock directory before the fork
  int held[2], done[2];
  REQUIRE(::pipe(held) == 0);
  REQUIRE(::pipe(done) == 0);
  const pid_t other = ::fork();
  REQUIRE(other >= 0);
  if (other == 0) {  // another worker: its own pool over the same range and lock directory
    char byte = 'n';
    std::optional<uid_lease> lease;
    if (auto pool = uid_pool::per_execution(range)) {
      if (auto taken = pool.value()->acquire()) lease.emplace(std::move(taken).value());
    }
    if (lease) byte = 'y';
    (void)!::write(held[1], &byte, 1);
    (void)!::read(done[0], &byte, 1);
    ::_exit(0);  // the lock goes with the process, as it would with a crashed worker
  }
  char byte = 0;
  REQUIRE(::read(held[0], &byte, 1) == 1);
  REQUIRE(byte == 'y');
  auto pool = uid_pool::per_execution(range);
  REQUIRE(pool);
  auto refused = pool.value()->acquire();
  CHECK_FALSE(refused);
  (void)!::write(done[1], "x", 1);
  int status = 0;
  REQUIRE(::waitpid(other, &status, 0) == other);
  for (int fd : {held[0], held[1], done[0], done[1]}) ::close(fd);
  // The other worker ended without letting the uid go cleanly: it is handed out again all the same.
  auto after = pool.value()->acquire();
  REQUIRE(after);
  CHECK(after.value().identity().uid == pool_first);
}

TEST_CASE("uid pool: a lock directory others could write is refused") {
  psych::testing::temp_dir scratch("psych-uid-pool");
  const auto open = scratch.file("open");
  REQUIRE(::mkdir(open.c_str(), 0777) == 0);
  REQUIRE(::chmod(open.c_str(), 0777) == 0);
  auto pool = uid_pool::per_execution({.first = pool_first, .count = 4, .lock_dir = open});
  REQUIRE_FALSE(pool);
  CHECK(pool.error().kind == error_kind::sandbox_setup);
  CHECK(pool.error().message().find("nobody else may write") != std::string::npos);
  CHECK_FALSE(uid_pool::per_execution({.first = pool_first, .count = 4, .lock_dir = "relative/dir"}));
  CHECK_FALSE(uid_pool::per_execution({.first = 0, .count = 4, .lock_dir = scratch.file("uids")}));
  CHECK_FALSE(uid_pool::per_execution({.first = pool_first, .count = 0, .lock_dir = scratch.file("uids")}));
}

TEST_CASE("uid pool: a uid a live process uses is skipped, and a lease whose uid outlives it is held back") {
  if (!is_root()) return psych::testing::skip_case("needs root: it hands out uids and chowns files to them");
  psych::testing::temp_dir scratch("psych-uid-pool");
  auto pool = uid_pool::per_execution(range_in(scratch, 2, pool_first + 10));
  REQUIRE(pool);
  {
    process_of_uid stray(pool_first + 10);
    auto lease = pool.value()->acquire();
    REQUIRE(lease);
    CHECK(lease.value().identity().uid == pool_first + 11);  // not the stray's
    const auto seen = pool.value()->report();
    CHECK(seen.stray == 1);
    CHECK(seen.held == 1);
    CHECK(seen.free == 0);
  }
  // A lease whose uid still has a process at release: held back, not handed out, until it is gone.
  auto lease = pool.value()->acquire();
  REQUIRE(lease);
  const auto uid = lease.value().identity().uid;
  process_of_uid survivor(uid);
  const auto note = lease.value().release();
  REQUIRE(note);
  CHECK(note->find("held back") != std::string::npos);
  auto other = pool.value()->acquire();
  REQUIRE(other);
  CHECK(other.value().identity().uid != uid);
  CHECK_FALSE(pool.value()->acquire());  // one held back, one held
  survivor.end();
  auto again = pool.value()->acquire();
  REQUIRE(again);
  CHECK(again.value().identity().uid == uid);
}

TEST_CASE("uid pool: a uid its last holder never let go is swept before it is handed out") {
  if (!is_root()) return psych::testing::skip_case("needs root: it hands out uids and chowns files to them");
  psych::testing::temp_dir scratch("psych-uid-pool");
  const std::int64_t uid = pool_first + 20;
  auto pool = uid_pool::per_execution(range_in(scratch, 1, uid));
  REQUIRE(pool);
  std::ofstream(scratch.file("uids") + "/" + std::to_string(uid) + ".lock") << "held by pid 1\n";
  const std::string left = "/tmp/psych-uid-pool-leftover-" + std::to_string(::getpid());
  std::ofstream(left) << "from the last execution";
  REQUIRE(::chown(left.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(uid)) == 0);
  auto lease = pool.value()->acquire();
  REQUIRE(lease);
  CHECK_FALSE(std::filesystem::exists(left));
  std::filesystem::remove(left);
}

// ---- what an execution's clean-up may touch ----------------------------------------

TEST_CASE("shared temp sweep: root's and the worker's own entries are never swept, whatever uid it is asked for") {
  // The sweep of a dedicated uid's leftovers runs as root; asked for root's own uid (or the
  // worker's) it would empty /tmp, /var/tmp, /dev/shm and /run/lock of the host's own entries.
  const std::string witness = "/tmp/psych-sweep-witness-" + std::to_string(::getpid());
  std::ofstream(witness) << "the worker's own";
  sweep_shared_temp(static_cast<std::int64_t>(::geteuid()));
  sweep_shared_temp(0);
  CHECK(std::filesystem::exists(witness));
  std::filesystem::remove(witness);
}

TEST_CASE("prepared pool: a claim's result comes back early and its clean-up touches nothing of the request's") {
  if (!is_root()) return psych::testing::skip_case("needs root: a pool at linux-process needs a uid per execution");
  // The claimant's plan is gone once its result is back; what the sandbox's thread does after
  // that (the launcher's exit, the directories, the sweep, the identity) must not read it. Run
  // sanitized (.ci/run's --sanitize-host), a read of it is a finding; in any build, a host entry
  // in /tmp must survive every clean-up.
  const std::string witness = "/tmp/psych-pool-witness-" + std::to_string(::getpid());
  std::ofstream(witness) << "the host's own";
  for (const char* backend : {"linux-process", "linux-namespaces"}) {
    CAPTURE(backend);
    local_sandbox_options options;
    options.backend = backend;
    options.pool.size = 1;
    auto sb = local_sandbox(options);
    REQUIRE_MESSAGE(sb, (sb ? "" : sb.error().message()));
    for (int i = 0; i < 4; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));  // slower than the refill
      auto request = std::make_unique<run_request>();
      request->program = "open('left-behind', 'w').write('x')\nreturn 7";
      request->terms.isolation = std::string_view(backend) == "linux-process" ? isolation_level::process
                                                                               : isolation_level::isolated;
      const auto r = sb.value()->run(*request, {});
      request.reset();
      REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : "no value"));
      CHECK(r.value->text == "7");
    }
    const auto d = sb.value()->describe();
    const auto pool_line = std::find_if(d.mechanisms.begin(), d.mechanisms.end(),
                                        [](const std::string& line) { return line.starts_with("prepared:"); });
    REQUIRE(pool_line != d.mechanisms.end());
    CHECK_MESSAGE(pool_line->find("claimed 0,") == std::string::npos, *pool_line);  // at least one was a claim
    sb.value().reset();  // the pool ends every sandbox and joins its thread
    CHECK(std::filesystem::exists(witness));
  }
  std::filesystem::remove(witness);
}
