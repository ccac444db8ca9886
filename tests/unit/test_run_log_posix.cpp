// The run log's cases that need POSIX (docs/run-log.md; test_run_log.cpp has the rest, which run on
// Windows too): a worker SIGKILLed mid-call leaves its call counted and UNKNOWN, a worker killed
// at random points loses no started call and runs none twice, and group commit syncs what it must
// and no more (fdatasync is counted, and held, through the seam below).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bindings/binding_gateway.hpp"
#include "run_log_files.hpp"
#include "skip.hpp"

using namespace psych;
using namespace psych::testing;
using namespace std::string_literals;

namespace psych::testing {
std::atomic<int> fdatasyncs{0};
}  // namespace psych::testing

namespace {

/// A test may hold the next fdatasync until it says.
std::atomic<bool (*)()> hold_fdatasync_until{nullptr};

}  // namespace

// This executable's definition comes before libc's, so the log's own fdatasync calls land here:
// the only way to see how many syncs group commit made without a hook in the code under test.
extern "C" int fdatasync(int fd) {
  ++fdatasyncs;
  if (auto* released = hold_fdatasync_until.exchange(nullptr)) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!released() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return static_cast<int>(::syscall(SYS_fdatasync, fd));
}

namespace {

/// A forked child that is killed and reaped however the test ends.
class child_process {
 public:
  explicit child_process(pid_t pid) : pid_{pid} {}
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  ~child_process() {
    if (pid_ > 0) kill_and_reap();
  }
  /// The wait status.
  int kill_and_reap() {
    ::kill(pid_, SIGKILL);
    return wait();
  }
  /// The wait status, once the child has ended by itself.
  int wait() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_;
};

}  // namespace

TEST_CASE("run log: a worker SIGKILLed mid-call leaves the call counted and UNKNOWN") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  std::array<int, 2> progress{};
  REQUIRE(::pipe2(progress.data(), O_CLOEXEC) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // the worker: no doctest here, and no destructors on the way out
    auto log = open_file_run_log(path);
    if (!log || !log.value()->append(call_started{"c1", "exec-1", "slow_tool", 3})) ::_exit(1);
    const char durable = 'd';
    if (::write(progress[1], &durable, 1) != 1) ::_exit(1);
    for (;;) ::pause();  // the tool is running
  }
  child_process worker{pid};
  ::close(progress[1]);
  char byte = 0;
  REQUIRE(::read(progress[0], &byte, 1) == 1);
  ::close(progress[0]);
  CHECK(byte == 'd');
  const int status = worker.kill_and_reap();
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));

  const auto tallied = tally(records_of(*open_log(path)));
  CHECK(tallied.spent.calls == 1);
  REQUIRE(tallied.unknown.size() == 1);
  CHECK(tallied.unknown[0].call_id == "c1");
}

TEST_CASE("run log: a worker SIGKILLed while appending loses nothing it reported durable") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  // Large records (large_record), so a kill may well land inside a write and leave a torn tail.
  std::size_t durable_before = 0;
  for (const std::size_t reported : {1u, 7u, 20u}) {
    CAPTURE(reported);
    std::array<int, 2> progress{};
    REQUIRE(::pipe2(progress.data(), O_CLOEXEC) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      auto log = open_file_run_log(path);
      if (!log) ::_exit(1);
      const std::size_t first = log.value()->records().value().size();
      for (std::size_t i = first; i < first + 400; ++i) {  // bounded: the parent may be slow to kill
        if (!log.value()->append(large_record(i))) ::_exit(1);
        const char durable = 'd';
        if (::write(progress[1], &durable, 1) != 1) ::_exit(1);
      }
      for (;;) ::pause();
    }
    child_process worker{pid};
    ::close(progress[1]);
    std::size_t seen = 0;
    char byte = 0;
    while (seen < reported && ::read(progress[0], &byte, 1) == 1) ++seen;
    worker.kill_and_reap();
    ::close(progress[0]);
    REQUIRE(seen == reported);

    const auto records = records_of(*open_log(path));
    CHECK(records.size() >= durable_before + reported);
    for (std::size_t i = 0; i < records.size(); ++i) {
      CAPTURE(i);
      CHECK(records[i] == large_record(i));
    }
    durable_before = records.size();
  }
}

TEST_CASE("run log: a deferred record is made durable by the next durable append or sync, and nothing twice") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  auto log = open_log(path);
  const int before = fdatasyncs;
  REQUIRE(log->append_deferred(finished("c0")));
  REQUIRE(log->append_deferred(started("c1")));
  CHECK(fdatasyncs == before);  // not waited for
  append(*log, started("c2"));
  CHECK(fdatasyncs == before + 1);  // one fdatasync for the three
  REQUIRE(log->sync());
  CHECK(fdatasyncs == before + 1);  // everything was synced already
  REQUIRE(log->append_deferred(finished("c2")));
  REQUIRE(log->sync());
  CHECK(fdatasyncs == before + 2);
  const std::vector<run_log_record> expected{finished("c0"), started("c1"), started("c2"), finished("c2")};
  CHECK(records_of(*log) == expected);
  log.reset();
  CHECK(records_of(*open_log(path)) == expected);
}

namespace {

const run_log* held_log = nullptr;
std::size_t held_until_records = 0;
bool held_records_written() {
  const auto records = held_log->records();
  return records && records.value().size() >= held_until_records;
}

}  // namespace

TEST_CASE("run log: records written while a sync is under way are all covered by the next one") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  auto log = open_log(path);
  constexpr int followers = 6;
  // The leader's fdatasync is held until every follower has written its record (records of one
  // size: ids c0..c6), so they all wait behind it, and one more fdatasync must cover them all.
  held_log = log.get();
  held_until_records = std::numeric_limits<std::size_t>::max();
  const int before = fdatasyncs;
  hold_fdatasync_until = held_records_written;
  std::jthread leader([&] { CHECK(log->append(started("c0"))); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (fdatasyncs == before && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(fdatasyncs == before + 1);  // the leader is in its fdatasync, its record written
  held_until_records = 1 + followers;
  {
    std::vector<std::jthread> waiting;
    for (int i = 1; i <= followers; ++i)
      waiting.emplace_back([&, i] { CHECK(log->append(started("c" + std::to_string(i)))); });
  }
  leader.join();
  CHECK(fdatasyncs == before + 2);
  CHECK(records_of(*log).size() == 1 + followers);
}

TEST_CASE("run log: fsync per record, the benchmark's baseline, syncs every record and writes format 2") {
  const run_log_dir dir;
  const std::vector<run_log_record> records{started("c1"), finished("c1"), started("c2")};
  const auto write_all = [&](const std::string& path, file_run_log_sync sync) {
    auto log = open_file_run_log(path, sync);
    REQUIRE(log);
    REQUIRE(log.value()->append_deferred(records[0]));
    REQUIRE(log.value()->append_deferred(records[1]));
    REQUIRE(log.value()->append(records[2]));
    REQUIRE(log.value()->sync());
  };
  const int before = fdatasyncs;
  write_all(dir.file("baseline.log"), file_run_log_sync::every_record);
  CHECK(fdatasyncs == before + 3);
  write_all(dir.file("group.log"), file_run_log_sync::group);
  CHECK(fdatasyncs == before + 4);
  // The baseline stands for the log before format 3: appends that grow the file.
  CHECK(contents_of(dir.file("baseline.log")).starts_with("PSYCHRL2"));
  CHECK(contents_of(dir.file("group.log")).starts_with("PSYCHRL3"));
  CHECK(records_of(*open_log(dir.file("baseline.log"))) == records);
  CHECK(records_of(*open_log(dir.file("group.log"))) == records);
}

namespace {

/// The crash worker with its stdout and stderr in `output`, and `ready` (if any) as its
/// descriptor 3; -1 if it could not be spawned.
pid_t spawn_crash_worker(std::vector<std::string> args, const std::string& output, int ready = -1) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  if (ready >= 0) posix_spawn_file_actions_adddup2(&actions, ready, 3);
  args.insert(args.begin(), PSYCH_CRASH_WORKER);
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return spawned == 0 ? pid : -1;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream file{path};
  for (std::string line; std::getline(file, line);) lines.push_back(line);
  return lines;
}

/// The log as a new worker would open it. A child the killed worker had forked and not yet
/// exec'd may hold the lock for a moment (docs/run-log.md, Writing): waited for, briefly.
std::vector<run_log_record> records_after_crash(const std::string& path) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    auto log = open_file_run_log(path);
    if (log) return records_of(*log.value());
    const bool held = log.error().detail.find("held by another process") != std::string::npos;
    if (!held || std::chrono::steady_clock::now() > deadline) FAIL(log.error().message());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

/// What any kill must leave: a log that opens (a torn tail is cut off), no call started twice or
/// finished unstarted, a durable start for every call whose tool ran, and no tool run twice.
/// Returns the calls left in flight (UNKNOWN).
std::set<std::string> checked_after_crash(const std::string& log_path, const std::vector<std::string>& ran) {
  const auto records = records_after_crash(log_path);
  std::set<std::string> started_calls;
  // Thousands of calls per check: only a failure is an assertion.
  for (const auto& record : records) {
    if (const auto* start = std::get_if<call_started>(&record)) {
      if (!started_calls.insert(start->call_id).second) FAIL_CHECK("started twice: " << start->call_id);
    } else if (const auto* end = std::get_if<call_finished>(&record)) {
      if (!started_calls.contains(end->call_id)) FAIL_CHECK("finished, never started: " << end->call_id);
    }
  }
  std::set<std::string> invoked;
  for (const auto& id : ran) {
    if (!started_calls.contains(id)) FAIL_CHECK("its tool ran, and its call_started was lost: " << id);
    if (!invoked.insert(id).second) FAIL_CHECK("its tool ran twice: " << id);
  }
  const auto tallied = tally(records);
  CHECK(tallied.spent.calls >= invoked.size());  // every call that ran is spent
  std::set<std::string> unknown;
  for (const auto& call : tallied.unknown) unknown.insert(call.call_id);
  return unknown;
}

}  // namespace

// A real session journalling sequential and gathered calls, SIGKILLed at a random moment, over
// and over on one log. PSYCH_CRASH_RUNS (default 50) and PSYCH_CRASH_SEED repeat or extend it
// by hand (scripts/run-log-crash-soak).
TEST_CASE("run log: a worker SIGKILLed at random points loses no started call and runs none twice") {
  const auto runs = from_environment("PSYCH_CRASH_RUNS", 50);
  const auto seed = from_environment("PSYCH_CRASH_SEED", std::random_device{}());
  std::printf("run log crash test: %llu runs, PSYCH_CRASH_SEED=%llu\n", runs, seed);
  CAPTURE(seed);
  std::mt19937_64 random{seed};
  // Most kills land among the calls: after the worker's tool first ran, within the time its
  // program takes to make its 460 calls and the next execution to start. One in five lands
  // anywhere from the worker's start: opening the log, marking what an earlier kill left in
  // flight, starting the sandbox and the first execution.
  std::bernoulli_distribution among_the_calls{0.8};
  std::uniform_int_distribution<int> kill_after_us{0, 250'000};
  std::uniform_int_distribution<int> kill_from_start_us{0, 500'000};
  const run_log_dir dir;
  REQUIRE(::chmod(dir.path().c_str(), 0711) == 0);  // each execution enters its workspace as its own uid
  const auto log_path = dir.file("run.log");
  const auto markers = dir.file("markers");
  const auto output = dir.file("worker.out");
  const std::vector<std::string> worker_args{log_path, markers, dir.path().string()};
  std::set<std::string> once_unknown;  // in flight at some kill: may never run afterwards
  std::size_t ran_before = 0;
  for (unsigned long long run = 0; run < runs; ++run) {
    const bool after_ready = among_the_calls(random);
    const int delay_us = after_ready ? kill_after_us(random) : kill_from_start_us(random);
    CAPTURE(run);
    CAPTURE(after_ready);
    CAPTURE(delay_us);
    std::array<int, 2> ready{};
    REQUIRE(::pipe2(ready.data(), O_CLOEXEC) == 0);
    const pid_t pid = spawn_crash_worker(worker_args, output, ready[1]);
    ::close(ready[1]);
    REQUIRE(pid > 0);  // never kill(-1)
    child_process worker{pid};
    if (after_ready) {
      pollfd said{.fd = ready[0], .events = POLLIN, .revents = 0};
      ::poll(&said, 1, 20'000);  // a worker that never says so is killed, and its output shown
    }
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    const int status = worker.kill_and_reap();
    ::close(ready[0]);  // only now: a worker saying it is ready to no reader would die of SIGPIPE
    if (WIFEXITED(status) && WEXITSTATUS(status) == 2) return psych::testing::skip_case(contents_of(output));
    REQUIRE_MESSAGE((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL), contents_of(output));
    const auto ran = lines_of(markers);
    for (std::size_t i = ran_before; i < ran.size(); ++i)
      if (once_unknown.contains(ran[i])) FAIL_CHECK("a call left in flight ran later: " << ran[i]);
    ran_before = ran.size();
    once_unknown.merge(checked_after_crash(log_path, ran));
  }

  // The next Attempt: what is still in flight becomes UNKNOWN, stays spent, and none of it runs.
  const pid_t pid = spawn_crash_worker({log_path, markers, dir.path().string(), "--resume-only"}, output);
  REQUIRE(pid > 0);
  child_process resumed{pid};
  const int status = resumed.wait();
  REQUIRE_MESSAGE((WIFEXITED(status) && WEXITSTATUS(status) == 0), contents_of(output));
  const auto records = records_of(*open_log(log_path));
  CHECK(tally(records).unknown.empty());
  for (const auto& record : records)
    if (const auto* end = std::get_if<call_finished>(&record); end && once_unknown.contains(end->call_id))
      CHECK(end->outcome == call_outcome{tool_error_kind::unknown_outcome});
  CHECK(lines_of(markers).size() == ran_before);
  MESSAGE(runs << " kills; " << ran_before << " tool runs; " << once_unknown.size() << " calls left in flight");
}

namespace {

/// Allows every call; the test drives the gateway by hand and never invokes.
struct allowing_policy final : tool_invoker {
  call_permission permit(const tool_call&) override { return {}; }
  void invoke(const tool_call&, std::stop_token, std::function<void(tool_outcome)> done) override {
    done(tool_outcome::error(tool_error_kind::tool_failed, "not run here"));
  }
};

}  // namespace

TEST_CASE("run log: the gateway syncs once for the calls admitted together, before any proceeds") {
  const run_log_dir dir;
  auto log = open_log(dir.file("run.log"));
  allowing_policy policy;
  host::binding_gateway gateway({.offered = {{"search", ""}},
                                 .invoker = &policy,
                                 .budget = {.max_calls = 10},
                                 .run = {.log = log.get(), .execution_id = "x1"}});
  const int before = fdatasyncs;
  std::vector<host::admitted_call> admitted;
  for (std::int64_t id = 1; id <= 3; ++id) {
    auto admission = gateway.admit({.id = id, .tool = "search", .arguments = json_text{"{}"}});
    REQUIRE(std::holds_alternative<host::admitted_call>(admission));
    admitted.push_back(std::get<host::admitted_call>(admission));
  }
  CHECK(fdatasyncs == before);  // written, not waited for
  CHECK(records_of(*log).size() == 3);
  for (const auto& call : admitted) {
    CHECK(std::holds_alternative<host::admitted_call>(gateway.proceed(call)));
    CHECK(fdatasyncs == before + 1);  // the first proceed synced all three starts; nothing since
  }
  for (const auto& call : admitted) CHECK(gateway.complete(call, tool_outcome::value("1")).ok);
  CHECK(fdatasyncs == before + 1);  // the finished records are not waited for
  CHECK(gateway.sync_journal());    // as at the end of an execution
  CHECK(fdatasyncs == before + 2);
  CHECK(tally(records_of(*log)).unknown.empty());
}

// Format 3 (docs/run-log.md): records overwrite a zero tail written ahead of them, and each says
