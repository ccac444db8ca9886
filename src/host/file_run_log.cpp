// The embedded default run log: one file per Run, format in docs/run-log.md.
//
// Durability rests on three things: a record reaches the file in one write, in order, under a
// mutex, and a durable append returns only once an fdatasync that started after that write has
// succeeded (group commit: one fdatasync covers every byte written before it began, whoever wrote
// them); an exclusive flock keeps a second process from interleaving its own appends (the kernel
// drops the lock when the holder dies, SIGKILL included); and a reopen tells a crash mid-append
// (a torn last record, dropped) from damage (anything else, refused).
#include "posix.hpp"
#include "psych/host/run_log.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include <boost/crc.hpp>
#include <boost/endian/conversion.hpp>
#include <boost/hana/adapt_struct.hpp>
#include <fmt/format.h>

#include "psych/protocol/json.hpp"

namespace psych {
namespace {

constexpr std::string_view magic = "PSYCHRL2";
constexpr std::string_view magic_v1 = "PSYCHRL1";  // never shipped; refused, not migrated
// u32 LE payload length, u32 LE bitwise complement of that length, u32 LE CRC-32 of the payload.
// The complement makes the length self-checking: a crash leaves only a prefix of a header written
// whole, so a complete header whose two length fields disagree is damage, never a torn write.
constexpr std::size_t record_header_bytes = 12;
constexpr std::size_t max_payload_bytes = 16u << 20;

// The codec's frames name their `type` and their required members in the struct; these add that
// to the port's plain records without touching the header other code builds against. Every member
// is required: this file writes all of them, so an absent one means the record is not ours.
struct started_record : call_started {
  static constexpr std::string_view type = "call_started";
  static constexpr std::array<std::string_view, 4> required_members{"call_id", "execution_id", "tool",
                                                                    "argument_bytes"};
};
struct finished_record : call_finished {
  static constexpr std::string_view type = "call_finished";
  static constexpr std::array<std::string_view, 6> required_members{"call_id",  "outcome",   "produced",
                                                                    "transfer", "preserved", "value_json"};
};
struct preserved_record : output_preserved {
  static constexpr std::string_view type = "output_preserved";
  static constexpr std::array<std::string_view, 3> required_members{"execution_id", "item", "bytes"};
};

}  // namespace
}  // namespace psych

BOOST_HANA_ADAPT_STRUCT(psych::started_record, call_id, execution_id, tool, argument_bytes);
BOOST_HANA_ADAPT_STRUCT(psych::finished_record, call_id, outcome, produced, transfer, preserved, value_json);
BOOST_HANA_ADAPT_STRUCT(psych::preserved_record, execution_id, item, bytes);

namespace psych {
namespace {

using host::unique_fd;
using host::pread_full;

auto syscall_failure(std::string_view call, const std::string& path) {
  return failure(error_kind::system_call_failed, fmt::format("{}({}): {}", call, path, std::strerror(errno)));
}

std::string encode_payload(const run_log_record& record) {
  std::string line = std::visit(
      [](const auto& r) {
        using plain = std::remove_cvref_t<decltype(r)>;
        if constexpr (std::is_same_v<plain, call_started>) return protocol::encode_frame(started_record{r});
        else if constexpr (std::is_same_v<plain, call_finished>) return protocol::encode_frame(finished_record{r});
        else return protocol::encode_frame(preserved_record{r});
      },
      record);
  line.pop_back();  // encode_frame ends an NDJSON line; the length prefix frames a record instead
  return line;
}

result<run_log_record> decode_payload(std::string_view payload) {
  PSYCH_TRY(auto frame, (protocol::decode_frame<started_record, finished_record, preserved_record>(
                            payload, protocol::json_bounds{.max_bytes = max_payload_bytes})));
  if (auto* started = std::get_if<started_record>(&frame)) return run_log_record{static_cast<call_started&&>(*started)};
  if (auto* finished = std::get_if<finished_record>(&frame))
    return run_log_record{static_cast<call_finished&&>(*finished)};
  return run_log_record{static_cast<output_preserved&&>(std::get<preserved_record>(frame))};
}

std::uint32_t crc_of(std::string_view bytes) {
  boost::crc_32_type crc;
  crc.process_bytes(bytes.data(), bytes.size());
  return crc.checksum();
}

/// Header and payload in one buffer, so one write carries the whole record.
std::string framed(std::string_view payload) {
  std::string out(record_header_bytes, '\0');
  auto* header = reinterpret_cast<unsigned char*>(out.data());
  const auto length = static_cast<std::uint32_t>(payload.size());
  boost::endian::store_little_u32(header, length);
  boost::endian::store_little_u32(header + 4, ~length);
  boost::endian::store_little_u32(header + 8, crc_of(payload));
  out.append(payload);
  return out;
}

result<void> read_at(int fd, const std::string& path, char* out, std::size_t n, std::uint64_t offset) {
  const ssize_t got = pread_full(fd, out, n, offset);
  if (got < 0) return syscall_failure("pread", path);
  if (static_cast<std::size_t>(got) < n)  // the size came from fstat under our lock: something else cut it short
    return failure(error_kind::run_log_corrupt,
                   fmt::format("{}: the file ended before the size it had under the lock", path));
  return success();
}

result<void> write_at(int fd, const std::string& path, std::string_view bytes, std::uint64_t offset) {
  while (!bytes.empty()) {
    const ssize_t put = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) return syscall_failure("pwrite", path);
    bytes.remove_prefix(static_cast<std::size_t>(put));
    offset += static_cast<std::uint64_t>(put);
  }
  return success();
}

/// A new file's directory entry is durable only once the directory itself is synced.
result<void> sync_parent_dir(const std::string& path) {
  std::string dir = std::filesystem::path{path}.parent_path().string();
  if (dir.empty()) dir = ".";
  const unique_fd handle{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (handle.get() < 0) return syscall_failure("open", dir);
  if (::fsync(handle.get()) != 0) return syscall_failure("fsync", dir);
  return success();
}

result<void> write_file_header(int fd, const std::string& path) {
  PSYCH_TRY(write_at(fd, path, magic, 0));
  if (::fsync(fd) != 0) return syscall_failure("fsync", path);
  return sync_parent_dir(path);
}

struct scanned {
  std::vector<run_log_record> records;
  std::uint64_t end = magic.size();  ///< where the last whole record ends
};

/// Walks the records after the magic. The first bad record is a torn tail when it is the last
/// bytes of the file and its header is short, or its header is whole and self-consistent but its
/// payload is short or, ending exactly at end of file, fails its CRC (what a crash mid-append
/// leaves); it stops the walk and the caller truncates. Any other bad record is corruption.
result<scanned> scan(int fd, const std::string& path, std::uint64_t size) {
  scanned out;
  std::string payload;
  for (std::size_t number = 1; out.end < size; ++number) {
    const std::uint64_t at = out.end;
    const auto corrupt = [&](std::string_view why) {
      return failure(error_kind::run_log_corrupt, fmt::format("{}: record {} at offset {}: {}", path, number, at, why));
    };
    if (size - at < record_header_bytes) break;  // torn: a short header
    std::array<unsigned char, record_header_bytes> header{};
    PSYCH_TRY(read_at(fd, path, reinterpret_cast<char*>(header.data()), header.size(), at));
    const std::uint32_t length = boost::endian::load_little_u32(header.data());
    const std::uint32_t complement = boost::endian::load_little_u32(header.data() + 4);
    const std::uint32_t stored_crc = boost::endian::load_little_u32(header.data() + 8);
    // A crash leaves a prefix of real bytes, so a whole header is exactly what the writer wrote:
    // disagreeing length fields, or a length over the cap the writer keeps, are damage even at
    // the tail. Only once the length is trusted may a payload past end of file mean a torn write.
    if (complement != static_cast<std::uint32_t>(~length))
      return corrupt(fmt::format("length field {:08x} and its complement {:08x} disagree", length, complement));
    if (length > max_payload_bytes)
      return corrupt(fmt::format("length {} exceeds the {}-byte record cap", length, max_payload_bytes));
    const std::uint64_t end = at + record_header_bytes + length;
    if (end > size) break;  // torn: a short payload
    payload.resize(length);
    PSYCH_TRY(read_at(fd, path, payload.data(), length, at + record_header_bytes));
    if (const std::uint32_t actual = crc_of(payload); actual != stored_crc) {
      if (end == size) break;  // torn: the last record, partly written
      return corrupt(fmt::format("CRC mismatch (stored {:08x}, computed {:08x})", stored_crc, actual));
    }
    // A record whose CRC holds is exactly what some writer meant, so failing to decode it is never
    // a torn write: dropping it could silently discard what a newer writer recorded.
    auto record = decode_payload(payload);
    if (!record) return corrupt(record.error().message());
    out.records.push_back(std::move(record).value());
    out.end = end;
  }
  return out;
}

class file_run_log final : public run_log {
 public:
  file_run_log(unique_fd fd, std::string path, scanned contents, file_run_log_sync sync)
      : fd_{std::move(fd)}, path_{std::move(path)}, sync_{sync}, end_{contents.end}, synced_end_{contents.end},
        records_{std::move(contents.records)} {}

  result<void> append(const run_log_record& record) override {
    PSYCH_TRY(const std::uint64_t end, write(record));
    std::unique_lock lock{mutex_};
    return durable_through(lock, end);
  }

  result<void> append_deferred(const run_log_record& record) override {
    PSYCH_TRY(write(record));
    return success();
  }

  result<void> sync() override {
    std::unique_lock lock{mutex_};
    return durable_through(lock, end_);
  }

  result<std::vector<run_log_record>> records() const override {
    const std::lock_guard lock{mutex_};
    return records_;
  }

 private:
  /// Writes one record after the last; returns where it ends. Durable before returning only
  /// under file_run_log_sync::every_record, where each record gets its own fdatasync.
  result<std::uint64_t> write(const run_log_record& record) {
    const std::string payload = encode_payload(record);
    if (payload.size() > max_payload_bytes)
      return failure(error_kind::invalid_argument,
                     fmt::format("{}: a record of {} bytes exceeds the {}-byte record cap", path_, payload.size(),
                                 max_payload_bytes));
    // Kept as a reopen will decode it (the codec repairs invalid UTF-8), so records() never
    // changes meaning across a restart.
    PSYCH_TRY(auto stored, decode_payload(payload));
    const std::string bytes = framed(payload);

    const std::lock_guard lock{mutex_};
    if (broken_) return failure(error_kind::system_call_failed, broken_.value());
    if (auto written = write_at(fd_.get(), path_, bytes, end_); !written) {
      undo_partial_append();
      return std::move(written).as_failure();
    }
    end_ += bytes.size();
    records_.push_back(std::move(stored));
    if (sync_ == file_run_log_sync::every_record) {
      if (::fdatasync(fd_.get()) != 0) return fdatasync_failed();
      synced_end_ = end_;
    }
    return end_;
  }

  /// Group commit. The first thread that needs bytes synced leads: it syncs everything written so
  /// far, with the mutex released so that others keep writing meanwhile. Threads arriving during
  /// its fdatasync wait for it, and the first of them whose bytes it did not cover leads the next,
  /// which covers all of theirs at once.
  result<void> durable_through(std::unique_lock<std::mutex>& lock, std::uint64_t end) {
    for (;;) {
      if (broken_) return failure(error_kind::system_call_failed, broken_.value());
      if (synced_end_ >= end) return success();
      if (!syncing_) break;
      synced_.wait(lock);
    }
    syncing_ = true;
    const std::uint64_t covered = end_;  // every byte here was written before the fdatasync begins
    lock.unlock();
    const bool synced = ::fdatasync(fd_.get()) == 0;
    const int error = errno;
    lock.lock();
    syncing_ = false;
    synced_.notify_all();
    if (!synced) {
      errno = error;
      return fdatasync_failed();
    }
    synced_end_ = covered;
    return success();
  }

  /// After a failed fdatasync the kernel may have dropped the pages it could not write and
  /// reports the error once: neither a retry nor what is in memory can be trusted any more, so the
  /// log takes no more records (a reopen reads what the file really holds).
  boost::outcome_v2::failure_type<error> fdatasync_failed() {
    broken_ = fmt::format("fdatasync({}): {} (the log takes no more records)", path_, std::strerror(errno));
    return failure(error_kind::system_call_failed, broken_.value());
  }

  /// A failed write may have left some of its bytes; the next append must not land after them.
  /// If they cannot be cut off, the log refuses further appends rather than journal past damage.
  void undo_partial_append() {
    if (::ftruncate(fd_.get(), static_cast<off_t>(end_)) == 0) return;
    broken_ = fmt::format("ftruncate({}): {} (after a failed append; the log takes no more records)", path_,
                          std::strerror(errno));
  }

  unique_fd fd_;
  std::string path_;
  file_run_log_sync sync_;
  mutable std::mutex mutex_;
  std::condition_variable synced_;  ///< a leader's fdatasync ended
  std::uint64_t end_;               ///< where the last whole record written ends
  std::uint64_t synced_end_;        ///< every byte before this is durable
  bool syncing_ = false;            ///< a leader is in fdatasync, with the mutex released
  std::vector<run_log_record> records_;
  std::optional<std::string> broken_;
};

result<void> lock_exclusively(int fd, const std::string& path) {
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK)
      return failure(error_kind::system_call_failed,
                     fmt::format("flock({}): run log is held by another process", path));
    return syscall_failure("flock", path);
  }
  return success();
}

/// A file shorter than the magic is a creation that never finished (or has not started):
/// write the magic, provided what is there is a prefix of it and not someone else's file.
result<void> check_or_write_magic(int fd, const std::string& path, std::uint64_t size) {
  std::string head(std::min<std::uint64_t>(size, magic.size()), '\0');
  PSYCH_TRY(read_at(fd, path, head.data(), head.size(), 0));
  if (head == magic_v1)
    return failure(error_kind::run_log_corrupt,
                   fmt::format("{}: offset 0: run log format 1 is not read by this version", path));
  if (!magic.starts_with(head))
    return failure(error_kind::run_log_corrupt, fmt::format("{}: offset 0: bad magic (not a psych run log)", path));
  if (head.size() < magic.size()) return write_file_header(fd, path);
  return success();
}

}  // namespace

result<std::unique_ptr<run_log>> open_file_run_log(const std::string& path, file_run_log_sync sync) {
  unique_fd fd{::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)};
  if (fd.get() < 0) return syscall_failure("open", path);
  PSYCH_TRY(lock_exclusively(fd.get(), path));

  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) return syscall_failure("fstat", path);
  const auto size = static_cast<std::uint64_t>(info.st_size);
  PSYCH_TRY(check_or_write_magic(fd.get(), path, size));

  PSYCH_TRY(auto contents, scan(fd.get(), path, std::max<std::uint64_t>(size, magic.size())));
  if (contents.end < size) {  // a torn tail: cut it off so the next append follows a whole record
    if (::ftruncate(fd.get(), static_cast<off_t>(contents.end)) != 0) return syscall_failure("ftruncate", path);
    if (::fsync(fd.get()) != 0) return syscall_failure("fsync", path);
  }
  return std::unique_ptr<run_log>{std::make_unique<file_run_log>(std::move(fd), path, std::move(contents), sync)};
}

}  // namespace psych
