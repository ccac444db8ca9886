#pragma once
// What the run log's cases share (test_run_log.cpp everywhere, test_run_log_posix.cpp on POSIX):
// a directory per case, records, and files framed, damaged and read back by hand.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <boost/crc.hpp>
#include <boost/endian/conversion.hpp>

#include "psych/host/run_log.hpp"
#include "run_log_access.hpp"
#include "temp_dir.hpp"

namespace psych::testing {

struct run_log_dir : temp_dir {
  run_log_dir() : temp_dir("psych-run-log-test") {}
};

#ifndef _WIN32
/// Every fdatasync this process makes, counted by test_run_log_posix.cpp's seam.
extern std::atomic<int> fdatasyncs;
#endif

inline void append(run_log& log, const run_log_record& record) {
  const auto appended = log.append(record);
  if (!appended) FAIL(appended.error().message());
}

inline std::uint64_t size_of(const std::string& path) { return std::filesystem::file_size(path); }

inline void flip_byte(const std::string& path, std::uint64_t offset) {
  std::fstream file{path, std::ios::in | std::ios::out | std::ios::binary};
  file.seekg(static_cast<std::streamoff>(offset));
  const char byte = static_cast<char>(file.get());
  file.seekp(static_cast<std::streamoff>(offset));
  file.put(static_cast<char>(byte ^ 0x20));
  REQUIRE(file.good());
}

inline std::string contents_of(const std::string& path) {
  std::ifstream file{path, std::ios::binary};
  return {std::istreambuf_iterator<char>{file}, {}};
}

inline void write_raw(const std::string& path, const std::string& bytes, std::ios::openmode mode = std::ios::trunc) {
  std::ofstream file{path, std::ios::binary | std::ios::out | mode};
  file << bytes;
  REQUIRE(file.good());
}

inline constexpr std::uint64_t magic_bytes = 8;
inline constexpr std::uint64_t header_bytes = 12;  // length, its complement, CRC

inline std::uint32_t crc_of(const std::string& bytes) {
  boost::crc_32_type crc;
  crc.process_bytes(bytes.data(), bytes.size());
  return crc.checksum();
}

/// A record header from its three fields, which need not agree.
inline std::string header(std::uint32_t length, std::uint32_t complement, std::uint32_t crc) {
  std::array<unsigned char, header_bytes> bytes{};
  boost::endian::store_little_u32(bytes.data(), length);
  boost::endian::store_little_u32(bytes.data() + 4, complement);
  boost::endian::store_little_u32(bytes.data() + 8, crc);
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

/// A record framed as docs/run-log.md says, for payloads the log itself would never write.
inline std::string framed(const std::string& payload) {
  const auto length = static_cast<std::uint32_t>(payload.size());
  return header(length, ~length, crc_of(payload)) + payload;
}

/// A record as format 1 framed it: length and CRC only.
inline std::string framed_v1(const std::string& payload) {
  std::array<unsigned char, 8> bytes{};
  boost::endian::store_little_u32(bytes.data(), static_cast<std::uint32_t>(payload.size()));
  boost::endian::store_little_u32(bytes.data() + 4, crc_of(payload));
  return std::string{reinterpret_cast<const char*>(bytes.data()), bytes.size()} + payload;
}

inline call_started started(std::string id) { return {std::move(id), "exec-1", "search", 42}; }

inline call_finished finished(std::string id, std::uint64_t bytes = 10) {
  return {std::move(id), call_outcome::ok(), bytes, bytes * 2, bytes / 2, R"({"hits":[1,2,3]})"};
}

/// Three records in a format 2 log (the fsync-per-record baseline creates one), whose torn-tail
/// and corruption rules most cases below are about; returns the file size after each.
inline std::array<std::uint64_t, 3> three_records(const std::string& path) {
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

inline void check_corrupt(const std::string& path, const std::string& expected_detail) {
  const auto before = size_of(path);
  const auto log = open_file_run_log(path);
  REQUIRE_FALSE(log);
  CHECK(log.error().kind == error_kind::run_log_corrupt);
  CAPTURE(log.error().detail);
  CHECK(log.error().detail.find(expected_detail) != std::string::npos);
  CHECK(size_of(path) == before);  // refused, and left as found for whoever investigates
}


/// Record `i` of the cases that kill a worker while it appends (test_run_log_posix.cpp, and
/// tests/windows_host on Windows): large, so that a kill may well land inside a write.
inline run_log_record large_record(std::size_t i) {
  if (i % 2 == 0) return call_started{"c" + std::to_string(i / 2), "exec-1", std::string(20000, 't'), i};
  return call_finished{"c" + std::to_string(i / 2), call_outcome::ok(), i, i, i, std::string(20000, 'v')};
}

inline unsigned long long from_environment(const char* name, unsigned long long otherwise) {
  const char* value = std::getenv(name);
  return value && *value ? std::stoull(value) : otherwise;
}

}  // namespace psych::testing
