// The run log's file format (src/host/store/file_run_log.cpp, docs/run-log.md), through the public
// open_file_run_log: the input becomes a file, which is opened and read.
//
// Two modes, by the first byte, because a CRC-32 is out of a mutator's reach:
//  - raw: the rest of the input is the whole file (magic, headers, damage of every kind);
//  - framed: the rest is a list of payloads this harness frames the way docs/run-log.md says
//    (format 2: length, its complement, CRC-32; format 3: the same, the CRC also over `durable`,
//    then `durable`, here 0), then cuts the file short by a fuzzer-chosen count and, in format 3,
//    puts the zeros of a tail after the cut, so the payload decoder and the torn-tail rules see
//    well-framed records.
//
// Oracle: an open that succeeds is stable (closing and reopening yields the same records, since
// a torn tail was cut off), and a record appended after it reads back last on the next open.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <boost/crc.hpp>
#include <boost/endian/conversion.hpp>

#include "input.hpp"
#include "psych/host/run_log.hpp"

namespace {

const std::string& scratch_file() {
  static const std::string path = [] {
    std::string dir = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path().string();
    dir += "/psych-fuzz-run-log-XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr) std::abort();
    static const std::string kept = dir;
    std::atexit([] { std::filesystem::remove_all(kept); });
    return dir + "/run.log";
  }();
  return path;
}

void write_file(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  PSYCH_FUZZ_CHECK(fd >= 0);
  while (!bytes.empty()) {
    const ssize_t put = ::write(fd, bytes.data(), bytes.size());
    PSYCH_FUZZ_CHECK(put > 0);
    bytes.remove_prefix(static_cast<std::size_t>(put));
  }
  ::close(fd);
}

/// The format as docs/run-log.md states it: magic, then per record a u32 LE length, its bitwise
/// complement, the CRC-32 of the payload (format 3: followed by `durable`), format 3's u64 LE
/// `durable`, and the payload. Payloads are separated by '\n' here.
std::string framed_file(std::string_view payloads, bool format_3) {
  std::string out = format_3 ? "PSYCHRL3" : "PSYCHRL2";
  const unsigned char no_durable[8] = {};
  while (!payloads.empty()) {
    const std::size_t nl = payloads.find('\n');
    const std::string_view payload = payloads.substr(0, nl);
    payloads.remove_prefix(nl == std::string_view::npos ? payloads.size() : nl + 1);
    boost::crc_32_type crc;
    crc.process_bytes(payload.data(), payload.size());
    if (format_3) crc.process_bytes(no_durable, sizeof no_durable);
    unsigned char header[12];
    const auto length = static_cast<std::uint32_t>(payload.size());
    boost::endian::store_little_u32(header, length);
    boost::endian::store_little_u32(header + 4, ~length);
    boost::endian::store_little_u32(header + 8, crc.checksum());
    out.append(reinterpret_cast<const char*>(header), sizeof header);
    if (format_3) out.append(reinterpret_cast<const char*>(no_durable), sizeof no_durable);
    out.append(payload);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  psych::fuzz::input in{data, size};
  const std::uint8_t mode = in.byte();
  std::string file;
  if (mode & 1) {
    const bool format_3 = (mode & 2) != 0;
    file = framed_file(in.rest(), format_3);
    const std::size_t cut = mode >> 2;  // up to 63 bytes off the end: a crash mid-append
    file.resize(file.size() - std::min(cut, file.size()));
    if (format_3) file.append(256, '\0');  // the zeros a torn record was written into
  } else {
    file = std::string{in.rest()};
  }
  const std::string& path = scratch_file();
  write_file(path, file);

  std::vector<psych::run_log_record> first;
  {
    auto log = psych::open_file_run_log(path);
    if (!log) {
      (void)log.error().message();
      return 0;
    }
    auto records = log.value()->records();
    PSYCH_FUZZ_CHECK(static_cast<bool>(records));
    first = std::move(records).value();
  }
  const psych::run_log_record added =
      psych::call_finished{.call_id = "fuzz", .outcome = psych::call_outcome::ok(), .produced = 1};
  {
    auto log = psych::open_file_run_log(path);
    PSYCH_FUZZ_CHECK(static_cast<bool>(log));  // what opened once opens again
    auto records = log.value()->records();
    PSYCH_FUZZ_CHECK(static_cast<bool>(records) && records.value() == first);
    PSYCH_FUZZ_CHECK(static_cast<bool>(log.value()->append(added)));
  }
  auto log = psych::open_file_run_log(path);
  PSYCH_FUZZ_CHECK(static_cast<bool>(log));
  auto records = log.value()->records();
  PSYCH_FUZZ_CHECK(static_cast<bool>(records));
  first.push_back(added);
  PSYCH_FUZZ_CHECK(records.value() == first);
  return 0;
}
