// The embedded run log (src/host/file_run_log.cpp, docs/run-log.md): records survive a reopen
// exactly, a torn last record is dropped, damage before it is refused, one process holds a log
// at a time, and a worker SIGKILLed mid-call leaves its call counted and UNKNOWN.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <boost/crc.hpp>
#include <boost/endian/conversion.hpp>

#include "temp_dir.hpp"
#include "psych/host/run_log.hpp"

using namespace psych;
using namespace std::string_literals;
namespace fs = std::filesystem;

namespace {

struct temp_dir : psych::testing::temp_dir {
  temp_dir() : psych::testing::temp_dir("psych-run-log-test") {}
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
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_;
};

std::unique_ptr<run_log> open_log(const std::string& path) {
  auto log = open_file_run_log(path);
  if (!log) FAIL(log.error().message());
  return std::move(log).value();
}

std::vector<run_log_record> records_of(const run_log& log) {
  auto records = log.records();
  REQUIRE(records);
  return std::move(records).value();
}

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

/// Three records; returns the file size after each.
std::array<std::uint64_t, 3> three_records(const std::string& path) {
  auto log = open_log(path);
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
  const temp_dir dir;
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
  const temp_dir dir;
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
  std::ifstream file{path, std::ios::binary};
  const std::string bytes{std::istreambuf_iterator<char>{file}, {}};
  CHECK(bytes.find(R"({"type":"output_preserved","execution_id":"x1","item":"stdout","bytes":20000})") !=
        std::string::npos);
  const auto records = records_of(*open_log(path));
  REQUIRE(records.size() == 2);
  CHECK(records[1] == run_log_record{output_preserved{"x1", "stdout", 20000}});
}

TEST_CASE("run log: value_json is stored as a JSON string, never spliced") {
  const temp_dir dir;
  const auto path = dir.file("run.log");
  append(*open_log(path), call_finished{"c1", "ok", 1, 1, 1, R"({"x":1})"});
  std::ifstream file{path, std::ios::binary};
  const std::string bytes{std::istreambuf_iterator<char>{file}, {}};
  CHECK(bytes.find(R"("value_json":"{\"x\":1}")") != std::string::npos);
}

TEST_CASE("run log: invalid UTF-8 is repaired once, so records() means the same before and after a reopen") {
  const temp_dir dir;
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
  const temp_dir dir;
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
  const temp_dir dir;
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
  const temp_dir dir;
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
  const temp_dir dir;
  const auto path = dir.file("run.log");
  const auto ends = three_records(path);
  constexpr std::uint32_t huge = (16u << 20) + 1;
  fs::resize_file(path, ends[1]);
  write_raw(path, header(huge, ~huge, 0) + "abcd", std::ios::app);
  check_corrupt(path, "record 3 at offset " + std::to_string(ends[1]) + ": length 16777217 exceeds");
}

TEST_CASE("run log: a damaged length is corruption, even when it points past end of file") {
  // Format 1 took this for a torn tail and silently dropped records 2 and 3.
  const temp_dir dir;
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
  const temp_dir dir;
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
  const temp_dir dir;
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
  const temp_dir dir;
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
  const temp_dir dir;
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
  const temp_dir dir;
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
  const temp_dir dir;
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
