// The embedded run log (src/host/store/file_run_log.cpp, docs/run-log.md): records survive a reopen
// exactly, a torn last record is dropped, damage before it is refused, one process holds a log at
// a time, appends from many threads are all kept, and format 3's tail and crash rules. These run on
// POSIX (run_log_tests) and on Windows (psych-windows-host-parts-tests.exe, under Wine here);
// test_run_log_posix.cpp has the cases that fork, SIGKILL, or count fdatasync.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "run_log_files.hpp"
#ifdef _WIN32
#include "parts.hpp"  // tests/windows_host: check_private
#endif

using namespace psych;
using namespace psych::testing;
using namespace std::string_literals;
namespace fs = std::filesystem;

TEST_CASE("run log: every record kind round-trips exactly, awkward strings included") {
  const run_log_dir dir;
  const auto path = dir.file("run.log");
  const std::vector<run_log_record> written{
      call_started{"c\"1\"", "", "back\\slash\\", 0},
      call_started{"c2", "exec \n\r\t", "ünïcødé ✓ 😀", std::uint64_t{1} << 63},
      call_finished{"c\"1\"", tool_error_kind::budget_exhausted, 0, 0, 0, ""},
      call_finished{"", call_outcome::from_spelling("nul\0inside\x01"s), 7, 8, 9, R"({"a":"b\"c","d":[1,2,{"e":null}]})"},
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
#ifdef _WIN32
  psych::testing::windows_host::check_private({path});  // the DACL that is Windows' mode 0600
#else
  CHECK((fs::status(path).permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));
#endif
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
  append(*open_log(path), call_finished{"c1", call_outcome::ok(), 1, 1, 1, R"({"x":1})"});
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
#ifdef _WIN32
  CHECK(second.error().detail == "LockFileEx(" + path + "): run log is held by another process");
#else
  CHECK(second.error().detail == "flock(" + path + "): run log is held by another process");
#endif
  first.reset();
  CHECK(open_file_run_log(path));
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
#ifndef _WIN32
  const int syncs_before = fdatasyncs;
#endif
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
#ifndef _WIN32  // counted only where fdatasync can be (test_run_log_posix.cpp)
  // A sync is led only for a durable append that no earlier sync covered: never more than those.
  CHECK(fdatasyncs - syncs_before <= threads * (per_thread - (per_thread + 2) / 3));
#endif

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
