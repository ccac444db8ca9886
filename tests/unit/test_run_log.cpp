// The embedded run log (src/host/file_run_log.cpp, docs/run-log.md): records survive a reopen
// exactly, a torn last record is dropped, damage before it is refused, one process holds a log
// at a time, a worker SIGKILLed mid-call leaves its call counted and UNKNOWN, and group commit
// syncs what it must and no more (fdatasync is counted, and held, through the seam below).
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
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/crc.hpp>
#include <boost/endian/conversion.hpp>

#include "binding_gateway.hpp"
#include "skip.hpp"
#include "temp_dir.hpp"
#include "psych/host/run_log.hpp"
#include "run_log_access.hpp"

using namespace psych;
using namespace std::string_literals;
namespace fs = std::filesystem;

using psych::testing::open_log;
using psych::testing::records_of;

namespace {

/// Every fdatasync this process makes, counted; a test may also hold the next one until it says.
std::atomic<int> fdatasyncs{0};
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

struct run_log_dir : psych::testing::temp_dir {
  run_log_dir() : psych::testing::temp_dir("psych-run-log-test") {}
};

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

void append(run_log& log, const run_log_record& record) {
  const auto appended = log.append(record);
  if (!appended) FAIL(appended.error().message());
}

std::uint64_t size_of(const std::string& path) { return fs::file_size(path); }

void flip_byte(const std::string& path, std::uint64_t offset) {
  std::fstream file{path, std::ios::in | std::ios::out | std::ios::binary};
  file.seekg(static_cast<std::streamoff>(offset));
  const char byte = static_cast<char>(file.get());
  file.seekp(static_cast<std::streamoff>(offset));
  file.put(static_cast<char>(byte ^ 0x20));
  REQUIRE(file.good());
}

std::string contents_of(const std::string& path) {
  std::ifstream file{path, std::ios::binary};
  return {std::istreambuf_iterator<char>{file}, {}};
}

void write_raw(const std::string& path, const std::string& bytes, std::ios::openmode mode = std::ios::trunc) {
  std::ofstream file{path, std::ios::binary | std::ios::out | mode};
  file << bytes;
  REQUIRE(file.good());
}

constexpr std::uint64_t magic_bytes = 8;
constexpr std::uint64_t header_bytes = 12;  // length, its complement, CRC

std::uint32_t crc_of(const std::string& bytes) {
  boost::crc_32_type crc;
  crc.process_bytes(bytes.data(), bytes.size());
  return crc.checksum();
}

/// A record header from its three fields, which need not agree.
std::string header(std::uint32_t length, std::uint32_t complement, std::uint32_t crc) {
  std::array<unsigned char, header_bytes> bytes{};
  boost::endian::store_little_u32(bytes.data(), length);
  boost::endian::store_little_u32(bytes.data() + 4, complement);
  boost::endian::store_little_u32(bytes.data() + 8, crc);
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

/// A record framed as docs/run-log.md says, for payloads the log itself would never write.
std::string framed(const std::string& payload) {
  const auto length = static_cast<std::uint32_t>(payload.size());
  return header(length, ~length, crc_of(payload)) + payload;
}

/// A record as format 1 framed it: length and CRC only.
std::string framed_v1(const std::string& payload) {
  std::array<unsigned char, 8> bytes{};
  boost::endian::store_little_u32(bytes.data(), static_cast<std::uint32_t>(payload.size()));
  boost::endian::store_little_u32(bytes.data() + 4, crc_of(payload));
  return std::string{reinterpret_cast<const char*>(bytes.data()), bytes.size()} + payload;
}

call_started started(std::string id) { return {std::move(id), "exec-1", "search", 42}; }

call_finished finished(std::string id, std::uint64_t bytes = 10) {
  return {std::move(id), "ok", bytes, bytes * 2, bytes / 2, R"({"hits":[1,2,3]})"};
}

/// Three records in a format 2 log (the fsync-per-record baseline creates one), whose torn-tail
/// and corruption rules most cases below are about; returns the file size after each.
std::array<std::uint64_t, 3> three_records(const std::string& path) {
  auto opened = open_file_run_log(path, file_run_log_sync::every_record);
  REQUIRE(opened);
  auto& log = opened.value();
  std::array<std::uint64_t, 3> ends{};
  append(*log, started("c1"));
  ends[0] = size_of(path);
  append(*log, finished("c1"));
  ends[1] = size_of(path);
  append(*log, started("c2"));
  ends[2] = size_of(path);
  return ends;
}

void check_corrupt(const std::string& path, const std::string& expected_detail) {
  const auto before = size_of(path);
  const auto log = open_file_run_log(path);
  REQUIRE_FALSE(log);
  CHECK(log.error().kind == error_kind::run_log_corrupt);
  CAPTURE(log.error().detail);
  CHECK(log.error().detail.find(expected_detail) != std::string::npos);
  CHECK(size_of(path) == before);  // refused, and left as found for whoever investigates
}

}  // namespace

TEST_CASE("run log: every record kind round-trips exactly, awkward strings included") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  const std::vector<run_log_record> written{
      call_started{"c\"1\"", "", "back\\slash\\", 0},
      call_started{"c2", "exec \n\r\t", "ünïcødé ✓ 😀", std::uint64_t{1} << 63},
      call_finished{"c\"1\"", "budget_exhausted", 0, 0, 0, ""},
      call_finished{"", "nul\0inside\x01"s, 7, 8, 9, R"({"a":"b\"c","d":[1,2,{"e":null}]})"},
      output_preserved{"exec-1", "stdout", 20000},
      output_preserved{"", "artifact:dir/\"quoted\" ✓.bin", std::uint64_t{1} << 40},
  };
  {
    auto log = open_log(path);
    CHECK(records_of(*log).empty());
    for (const auto& record : written) append(*log, record);
    CHECK(records_of(*log) == written);
  }
  const auto reopened = open_log(path);
  CHECK(records_of(*reopened) == written);
  CHECK((fs::status(path).permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));
}

TEST_CASE("run log: an output_preserved record is the documented JSON, and a log without one still reads") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  // Written by hand as docs/run-log.md lays it out: a format-2 log from before the record existed,
  // then the new record appended by this version.
  const std::string older = R"({"type":"call_started","call_id":"c1","execution_id":"","tool":"search","argument_bytes":42})";
  write_raw(path, "PSYCHRL2" + framed(older));
  {
    auto log = open_log(path);
    CHECK(records_of(*log) == std::vector<run_log_record>{call_started{"c1", "", "search", 42}});
    append(*log, output_preserved{"x1", "stdout", 20000});
  }
  const std::string bytes = contents_of(path);
  CHECK(bytes.find(R"({"type":"output_preserved","execution_id":"x1","item":"stdout","bytes":20000})") !=
        std::string::npos);
  const auto records = records_of(*open_log(path));
  REQUIRE(records.size() == 2);
  CHECK(records[1] == run_log_record{output_preserved{"x1", "stdout", 20000}});
}

TEST_CASE("run log: value_json is stored as a JSON string, never spliced") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  append(*open_log(path), call_finished{"c1", "ok", 1, 1, 1, R"({"x":1})"});
  const std::string bytes = contents_of(path);
  CHECK(bytes.find(R"("value_json":"{\"x\":1}")") != std::string::npos);
}

TEST_CASE("run log: invalid UTF-8 is repaired once, so records() means the same before and after a reopen") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  std::vector<run_log_record> before;
  {
    auto log = open_log(path);
    append(*log, call_started{"c1", "", "tool\xff", 1});
    before = records_of(*log);
  }
  REQUIRE(before.size() == 1);
  CHECK(std::get<call_started>(before[0]).tool == "tool\xEF\xBF\xBD");  // U+FFFD
  CHECK(records_of(*open_log(path)) == before);
}

TEST_CASE("run log: tally sums the meters and lists the calls that never finished") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  {
    auto log = open_log(path);
    append(*log, started("c1"));
    append(*log, started("c2"));
    append(*log, finished("c1", 10));
    append(*log, started("c3"));
    append(*log, output_preserved{"exec-1", "stdout", 1000});
    append(*log, finished("c3", 4));
    append(*log, output_preserved{"exec-1", "artifact:out.csv", 300});
  }
  const auto tallied = tally(records_of(*open_log(path)));
  CHECK(tallied.spent.calls == 3);
  CHECK(tallied.spent.produced == 14);
  CHECK(tallied.spent.transfer == 28);
  CHECK(tallied.spent.preserved == 7 + 1000 + 300);  // the calls' recordings and the preserved outputs
  REQUIRE(tallied.unknown.size() == 1);
  CHECK(tallied.unknown[0] == started("c2"));
}

TEST_CASE("run log: a torn last record is dropped, the file cut back, and the log goes on") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  const auto ends = three_records(path);
  const auto last_bytes = ends[2] - ends[1];
  std::uint64_t cut = 0;
  SUBCASE("one byte short") { cut = 1; }
  SUBCASE("a header's width short") { cut = header_bytes; }
  SUBCASE("mid-payload") { cut = (last_bytes - header_bytes) / 2; }
  SUBCASE("the header alone") { cut = last_bytes - header_bytes; }
  SUBCASE("the header but one byte of its CRC") { cut = last_bytes - (header_bytes - 1); }
  SUBCASE("length and complement, no CRC") { cut = last_bytes - 8; }
  SUBCASE("the length alone") { cut = last_bytes - 4; }
  SUBCASE("part of the length") { cut = last_bytes - 3; }
  CAPTURE(cut);
  REQUIRE(cut < last_bytes);
  fs::resize_file(path, ends[2] - cut);
  {
    auto log = open_log(path);
    const std::vector<run_log_record> first_two{started("c1"), finished("c1")};
    CHECK(records_of(*log) == first_two);
    CHECK(size_of(path) == ends[1]);
    append(*log, started("c9"));
  }
  const std::vector<run_log_record> now{started("c1"), finished("c1"), started("c9")};
  CHECK(records_of(*open_log(path)) == now);
}

TEST_CASE("run log: a flipped byte is a torn tail in the last record and corruption before it") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  const auto ends = three_records(path);
  SUBCASE("in the last record's payload") {
    flip_byte(path, ends[2] - 3);
    const std::vector<run_log_record> first_two{started("c1"), finished("c1")};
    CHECK(records_of(*open_log(path)) == first_two);
    CHECK(size_of(path) == ends[1]);
  }
  SUBCASE("in the first record's payload") {
    flip_byte(path, magic_bytes + header_bytes + 3);
    check_corrupt(path, "record 1 at offset 8: CRC mismatch");
  }
  SUBCASE("in the second record's CRC") {
    flip_byte(path, ends[0] + 9);
    check_corrupt(path, "record 2 at offset " + std::to_string(ends[0]) + ": CRC mismatch");
  }
}

TEST_CASE("run log: a length over the record cap is corruption even at the tail") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  const auto ends = three_records(path);
  constexpr std::uint32_t huge = (16u << 20) + 1;
  fs::resize_file(path, ends[1]);
  write_raw(path, header(huge, ~huge, 0) + "abcd", std::ios::app);
  check_corrupt(path, "record 3 at offset " + std::to_string(ends[1]) + ": length 16777217 exceeds");
}

TEST_CASE("run log: a damaged length is corruption, even when it points past end of file") {
  // Format 1 took this for a torn tail and silently dropped records 2 and 3.
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  const auto ends = three_records(path);
  SUBCASE("a bit flipped in the length") { flip_byte(path, magic_bytes + 2); }  // + 2 MiB: past end of file
  SUBCASE("a bit flipped in the complement") { flip_byte(path, magic_bytes + 4 + 2); }
  CHECK(size_of(path) < magic_bytes + header_bytes + (2u << 20));
  check_corrupt(path, "record 1 at offset 8: length field ");
  check_corrupt(path, "and its complement ");
  CHECK(size_of(path) == ends[2]);
}

TEST_CASE("run log: a whole header whose length fields disagree is corruption even at the tail") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  const auto ends = three_records(path);
  const std::string payload =
      R"({"type":"call_started","call_id":"c3","execution_id":"","tool":"t","argument_bytes":1})";
  const auto length = static_cast<std::uint32_t>(payload.size());
  const auto crc = crc_of(payload);
  SUBCASE("payload complete") { write_raw(path, header(length, ~length ^ 1u, crc) + payload, std::ios::app); }
  SUBCASE("payload short") { write_raw(path, header(length, ~length ^ 1u, crc) + "{", std::ios::app); }
  SUBCASE("no payload, the complement a copy of the length") {
    write_raw(path, header(length, length, crc), std::ios::app);
  }
  check_corrupt(path, "record 4 at offset " + std::to_string(ends[2]) + ": length field ");
}

TEST_CASE("run log: a whole record that is not ours is corruption, never a torn tail") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  const auto ends = three_records(path);
  std::string payload;
  SUBCASE("an unknown type") { payload = R"({"type":"call_cancelled","call_id":"c2"})"; }
  SUBCASE("a missing member") { payload = R"({"type":"call_started","call_id":"c3","tool":"t","argument_bytes":1})"; }
  SUBCASE("a member of the wrong kind") {
    payload = R"({"type":"call_started","call_id":"c3","execution_id":"","tool":"t","argument_bytes":"1"})";
  }
  SUBCASE("not JSON") { payload = "{\"type\":"; }
  CAPTURE(payload);
  write_raw(path, framed(payload), std::ios::app);
  check_corrupt(path, "record 4 at offset " + std::to_string(ends[2]) + ": ");
}

TEST_CASE("run log: the header magic") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  SUBCASE("a bad magic is corruption") {
    write_raw(path, "PSYCHRL9" + framed(R"({"type":"call_started"})"));
    check_corrupt(path, "bad magic");
  }
  SUBCASE("a format 1 log is refused, not migrated") {
    write_raw(path, "PSYCHRL1" + framed_v1(R"({"type":"call_started","call_id":"c1","execution_id":"",)"
                                           R"("tool":"t","argument_bytes":1})"));
    check_corrupt(path, "offset 0: run log format 1 is not read by this version");
  }
  SUBCASE("an empty format 1 log is refused too") {
    write_raw(path, "PSYCHRL1");
    check_corrupt(path, "run log format 1 is not read by this version");
  }
  SUBCASE("a short file that is not a prefix of the magic is not ours") {
    write_raw(path, "{}\n");
    check_corrupt(path, "bad magic");
  }
  SUBCASE("an empty file is a new log") {
    write_raw(path, "");
    {
      auto log = open_log(path);
      CHECK(records_of(*log).empty());
      CHECK(size_of(path) == 8);
      append(*log, started("c1"));
    }
    CHECK(records_of(*open_log(path)) == std::vector<run_log_record>{started("c1")});
  }
  SUBCASE("a torn magic is a new log") {
    write_raw(path, "PSYC");
    CHECK(records_of(*open_log(path)).empty());
    CHECK(size_of(path) == 8);
  }
}

TEST_CASE("run log: one process holds a log at a time") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  auto first = open_log(path);
  const auto second = open_file_run_log(path);
  REQUIRE_FALSE(second);
  CHECK(second.error().kind == error_kind::system_call_failed);
  CHECK(second.error().detail == "flock(" + path + "): run log is held by another process");
  first.reset();
  CHECK(open_file_run_log(path));
}

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
  // Large records, so a kill may well land inside a write and leave a torn tail.
  const auto record_number = [](std::size_t i) -> run_log_record {
    if (i % 2 == 0) return call_started{"c" + std::to_string(i / 2), "exec-1", std::string(20000, 't'), i};
    return call_finished{"c" + std::to_string(i / 2), "ok", i, i, i, std::string(20000, 'v')};
  };
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
        if (!log.value()->append(record_number(i))) ::_exit(1);
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
      CHECK(records[i] == record_number(i));
    }
    durable_before = records.size();
  }
}

namespace {

call_started started_by(int thread, int number) {
  return {"t" + std::to_string(thread) + "-" + std::to_string(number), "exec-1", "search", 1};
}

}  // namespace

TEST_CASE("run log: appends from many threads at once are all kept, each thread's in its own order") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  constexpr int threads = 8;
  constexpr int per_thread = 40;
  std::atomic<int> failed{0};
  const int syncs_before = fdatasyncs;
  {
    auto log = open_log(path);
    std::vector<std::jthread> appenders;
    for (int t = 0; t < threads; ++t)
      appenders.emplace_back([&, t] {
        for (int i = 0; i < per_thread; ++i) {  // every third one deferred, the rest durable
          const auto appended = i % 3 == 0 ? log->append_deferred(started_by(t, i)) : log->append(started_by(t, i));
          if (!appended) ++failed;
        }
      });
  }
  CHECK(failed == 0);
  // A sync is led only for a durable append that no earlier sync covered: never more than those.
  CHECK(fdatasyncs - syncs_before <= threads * (per_thread - (per_thread + 2) / 3));

  const auto records = records_of(*open_log(path));
  REQUIRE(records.size() == threads * per_thread);
  std::array<int, threads> next{};
  for (const auto& record : records) {
    const auto& id = std::get<call_started>(record).call_id;
    const auto dash = id.find('-');
    const int thread = std::stoi(id.substr(1, dash - 1));
    CAPTURE(id);
    CHECK(std::stoi(id.substr(dash + 1)) == next[static_cast<std::size_t>(thread)]++);
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

unsigned long long from_environment(const char* name, unsigned long long otherwise) {
  const char* value = std::getenv(name);
  return value && *value ? std::stoull(value) : otherwise;
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
      CHECK(end->outcome == "unknown_outcome");
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
// how far the file was durable when it was written.
namespace {

constexpr std::uint64_t v3_header_bytes = 20;  // length, its complement, CRC, durable

/// A format 3 record framed by hand: the CRC covers the payload, then `durable`.
std::string framed_v3(const std::string& payload, std::uint64_t durable) {
  std::array<unsigned char, 8> durable_bytes{};
  boost::endian::store_little_u64(durable_bytes.data(), durable);
  boost::crc_32_type crc;
  crc.process_bytes(payload.data(), payload.size());
  crc.process_bytes(durable_bytes.data(), durable_bytes.size());
  const auto length = static_cast<std::uint32_t>(payload.size());
  return header(length, ~length, crc.checksum()) +
         std::string{reinterpret_cast<const char*>(durable_bytes.data()), durable_bytes.size()} + payload;
}

/// Where each whole-headed record of a format 3 file ends, read the way the layout says.
std::vector<std::uint64_t> v3_record_ends(const std::string& bytes) {
  std::vector<std::uint64_t> ends;
  std::uint64_t at = magic_bytes;
  while (at + v3_header_bytes <= bytes.size()) {
    const auto* fields = reinterpret_cast<const unsigned char*>(bytes.data() + at);
    const std::uint32_t length = boost::endian::load_little_u32(fields);
    if (boost::endian::load_little_u32(fields + 4) != static_cast<std::uint32_t>(~length)) break;
    at += v3_header_bytes + length;
    ends.push_back(at);
  }
  return ends;
}

bool zeros_from(const std::string& bytes, std::uint64_t offset) {
  return bytes.find_first_not_of('\0', offset) == std::string::npos;
}

const std::string sample_payload =
    R"({"type":"call_started","call_id":"c1","execution_id":"","tool":"t","argument_bytes":1})";

}  // namespace

TEST_CASE("run log format 3: records go into a zero tail, and a closed log keeps only its records") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  std::uint64_t records_end = 0;
  {
    auto log = open_log(path);
    append(*log, started("c1"));
    REQUIRE(log->append_deferred(finished("c1")));
    append(*log, started("c2"));
    const auto bytes = contents_of(path);
    CHECK(bytes.starts_with("PSYCHRL3"));
    const auto ends = v3_record_ends(bytes);
    REQUIRE(ends.size() == 3);
    records_end = ends[2];
    CHECK(bytes.size() >= records_end + (64u << 10) - v3_header_bytes);  // the tail, written ahead
    CHECK(bytes.size() % (64u << 10) == 0);
    CHECK(zeros_from(bytes, records_end));
  }
  CHECK(size_of(path) == records_end);
  {
    auto log = open_log(path);
    CHECK(records_of(*log) == std::vector<run_log_record>{started("c1"), finished("c1"), started("c2")});
    append(*log, finished("c2"));
    CHECK(size_of(path) > records_end + (64u << 10) - v3_header_bytes);
  }
  CHECK(records_of(*open_log(path)) ==
        std::vector<run_log_record>{started("c1"), finished("c1"), started("c2"), finished("c2")});
}

TEST_CASE("run log format 3: the tail grows in the write of the record that reaches its end") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  std::vector<run_log_record> written;
  {
    auto log = open_log(path);
    for (int i = 0; i < 1500; ++i) {  // about 150 KiB of records: the tail grows twice
      written.push_back(finished("c" + std::to_string(i), static_cast<std::uint64_t>(i)));
      REQUIRE(log->append_deferred(written.back()));
      if (i % 100 == 0) REQUIRE(log->sync());
      CHECK(size_of(path) % (64u << 10) == 0);
    }
    REQUIRE(log->sync());
    const auto bytes = contents_of(path);
    const auto ends = v3_record_ends(bytes);
    REQUIRE(ends.size() == written.size());
    CHECK(bytes.size() > (128u << 10));
    CHECK(zeros_from(bytes, ends.back()));
  }
  CHECK(records_of(*open_log(path)) == written);
}

TEST_CASE("run log format 3: zeros after the last record are its end, and the next append follows it") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  write_raw(path, "PSYCHRL3" + framed_v3(sample_payload, 0) + std::string(1000, '\0'));
  {
    auto log = open_log(path);
    CHECK(records_of(*log) == std::vector<run_log_record>{call_started{"c1", "", "t", 1}});
    append(*log, finished("c1"));
  }
  CHECK(records_of(*open_log(path)) == std::vector<run_log_record>{call_started{"c1", "", "t", 1}, finished("c1")});
}

TEST_CASE("run log format 3: a record that says bytes after its own start were durable is corruption") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  write_raw(path, "PSYCHRL3" + framed_v3(sample_payload, 9999));
  check_corrupt(path, "record 1 at offset 8: it says bytes up to 9999 were durable before it");
}

TEST_CASE("run log format 3: damage that a later record proves was durable is corruption, a crash's leftovers are not") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  {
    auto log = open_log(path);  // each append is synced before the next is written
    append(*log, started("c1"));
    append(*log, finished("c1"));
    append(*log, started("c2"));
  }
  const auto ends = v3_record_ends(contents_of(path));
  REQUIRE(ends.size() == 3);
  SUBCASE("a flipped byte in the first record") {
    flip_byte(path, magic_bytes + v3_header_bytes + 3);
    check_corrupt(path, "record 1 at offset 8: CRC mismatch");
    check_corrupt(path, "yet the record at offset " + std::to_string(ends[0]) + " was written after it was durable");
  }
  SUBCASE("the first record's header zeroed") {
    write_raw(path, contents_of(path).replace(magic_bytes, v3_header_bytes, v3_header_bytes, '\0'));
    check_corrupt(path, "record 1 at offset 8: length field 00000000 and its complement 00000000 disagree, yet");
  }
  SUBCASE("a flipped byte in the second record") {
    flip_byte(path, ends[0] + v3_header_bytes + 3);
    check_corrupt(path, "record 2 at offset " + std::to_string(ends[0]) + ": CRC mismatch");
  }
  SUBCASE("a flipped byte in the last record, which no later record vouches for, is a torn tail") {
    flip_byte(path, ends[2] - 3);
    {
      auto log = open_log(path);
      CHECK(records_of(*log) == std::vector<run_log_record>{started("c1"), finished("c1")});
      CHECK(zeros_from(contents_of(path), ends[1]));  // what was left of it is tail again
      append(*log, started("c9"));
    }
    CHECK(records_of(*open_log(path)) == std::vector<run_log_record>{started("c1"), finished("c1"), started("c9")});
  }
}

// A machine crash may keep any of the sectors written since the last sync, in any combination,
// and loses none written before it (fdatasync). Simulated from the bytes of a log still open: for
// every 512-byte sector past the last durable append, its new bytes or the zeros it held before.
TEST_CASE("run log format 3: after a simulated machine crash every durable record reads back, nothing else is invented") {
  const auto seed = from_environment("PSYCH_CRASH_SEED", std::random_device{}());
  CAPTURE(seed);
  std::mt19937_64 random{seed};
  std::bernoulli_distribution durable{0.3};
  std::bernoulli_distribution keep_sector{0.5};
  const run_log_dir dir;
  for (int round = 0; round < 200; ++round) {
    CAPTURE(round);
    const auto path = dir.file(("run-" + std::to_string(round) + ".log").c_str());
    const auto crashed = dir.file(("crashed-" + std::to_string(round) + ".log").c_str());
    std::vector<run_log_record> written;
    std::size_t durable_records = 0;
    std::string image;
    {
      auto log = open_log(path);
      for (int i = 0; i < 12; ++i) {
        // Payloads of several sizes, so records straddle sectors in every way.
        written.push_back(finished("c" + std::to_string(i), std::uint64_t{1} << (i * 5 % 60)));
        std::get<call_finished>(written.back()).value_json = std::string(static_cast<std::size_t>(i * 97 % 700), 'v');
        if (durable(random)) {
          append(*log, written.back());
          durable_records = written.size();
        } else {
          REQUIRE(log->append_deferred(written.back()));
        }
      }
      image = contents_of(path);  // as the kernel holds it; the log is still open, its tail unsynced
    }
    const auto ends = v3_record_ends(image);
    REQUIRE(ends.size() == written.size());
    const std::uint64_t synced = durable_records == 0 ? magic_bytes : ends[durable_records - 1];
    for (std::uint64_t sector = synced / 512 * 512; sector < ends.back(); sector += 512) {
      if (keep_sector(random)) continue;
      const std::uint64_t from = std::max(sector, synced);
      image.replace(from, sector + 512 - from, sector + 512 - from, '\0');
    }
    write_raw(crashed, image);
    std::vector<run_log_record> read;
    {
      auto log = open_file_run_log(crashed);
      if (!log) FAIL(log.error().message());
      read = records_of(*log.value());
      REQUIRE(read.size() >= durable_records);
      REQUIRE(read.size() <= written.size());
      CHECK(std::equal(read.begin(), read.end(), written.begin()));
      const auto reopened_bytes = contents_of(crashed);
      CHECK(zeros_from(reopened_bytes, v3_record_ends(reopened_bytes).empty() ? magic_bytes
                                                                               : v3_record_ends(reopened_bytes).back()));
      append(*log.value(), started("after"));
    }
    read.push_back(started("after"));
    CHECK(records_of(*open_log(crashed)) == read);
  }
}

TEST_CASE("run log format 3: a format 2 log stays format 2, appended to at its end") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  const auto ends = three_records(path);
  {
    auto log = open_log(path);
    append(*log, finished("c2"));
  }
  const auto bytes = contents_of(path);
  CHECK(bytes.starts_with("PSYCHRL2"));
  CHECK(bytes.size() == ends[2] + (ends[1] - ends[0]));  // one more record of finished("c1")'s size, no tail
  CHECK(records_of(*open_log(path)).size() == 4);
}
