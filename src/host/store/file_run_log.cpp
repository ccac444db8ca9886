// The embedded default run log: one file per Run, format in docs/run-log.md.
//
// Durability rests on three things: a record reaches the file in one write, in order, under a
// mutex, and a durable append returns only once a data sync (fdatasync; FlushFileBuffers on Windows)
// that started after that write has succeeded (group commit: one sync covers every byte written
// before it began, whoever wrote them); an exclusive lock keeps a second process from interleaving
// its own appends (the system drops the lock when the holder dies, killed included); and a reopen
// tells a crash mid-append (a torn tail, dropped) from damage (anything else, refused). The file's
// system calls are durable_file's, one half per system.
//
// Format 3 writes its records into zeros written ahead of them (a tail), because an fdatasync
// that need not commit a new file size is much cheaper: that is what makes one sync per call
// cheap. The price is that a machine crash may keep any part of the unsynced records, not only a
// prefix; each record therefore carries how far the file was durable when it was written, so
// that damage to bytes some later record says were durable is still told from a crash.
#include "store/durable_file.hpp"
#include "psych/host/run_log.hpp"

#include <algorithm>
#include <array>
#include <condition_variable>
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

constexpr std::string_view magic_v1 = "PSYCHRL1";  // never shipped; refused, not migrated
constexpr std::string_view magic_v2 = "PSYCHRL2";
constexpr std::string_view magic_v3 = "PSYCHRL3";
constexpr std::size_t magic_bytes = 8;
constexpr std::size_t max_payload_bytes = 16u << 20;
// Format 3's tail grows by at least this much at a time, so a new file size is committed by one
// sync in some hundreds of records rather than by every one.
constexpr std::uint64_t tail_bytes = 64u << 10;

/// The two formats this version writes. Format 2: u32 LE payload length, u32 LE bitwise
/// complement of that length, u32 LE CRC-32 of the payload, appended at end of file. The
/// complement makes the length self-checking: an append that grows the file leaves only a prefix
/// of itself after a crash, so a whole header whose two length fields disagree is damage. Format
/// 3 adds a u64 LE `durable` (every byte before it was durable when the record was written), the
/// CRC covers the payload and then `durable`, and records overwrite a zero tail.
enum class log_format { v2, v3 };

constexpr std::size_t header_bytes_of(log_format format) { return format == log_format::v2 ? 12 : 20; }
constexpr std::string_view magic_of(log_format format) { return format == log_format::v2 ? magic_v2 : magic_v3; }

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

using host::durable_file;

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

/// The record's CRC-32: of the payload, and in format 3 of `durable` after it.
std::uint32_t crc_of(log_format format, std::string_view payload, std::uint64_t durable) {
  boost::crc_32_type crc;
  crc.process_bytes(payload.data(), payload.size());
  if (format == log_format::v3) {
    std::array<unsigned char, 8> bytes{};
    boost::endian::store_little_u64(bytes.data(), durable);
    crc.process_bytes(bytes.data(), bytes.size());
  }
  return crc.checksum();
}

/// Header and payload in one buffer, so one write carries the whole record.
std::string framed(log_format format, std::string_view payload, std::uint64_t durable) {
  std::string out(header_bytes_of(format), '\0');
  auto* header = reinterpret_cast<unsigned char*>(out.data());
  const auto length = static_cast<std::uint32_t>(payload.size());
  boost::endian::store_little_u32(header, length);
  boost::endian::store_little_u32(header + 4, ~length);
  boost::endian::store_little_u32(header + 8, crc_of(format, payload, durable));
  if (format == log_format::v3) boost::endian::store_little_u64(header + 12, durable);
  out.append(payload);
  return out;
}

result<void> read_at(const durable_file& file, char* out, std::size_t n, std::uint64_t offset) {
  PSYCH_TRY(const std::size_t got, file.read_at(out, n, offset));
  if (got < n)  // the size was read under our lock: something else cut the file short
    return fail_with(error_kind::run_log_corrupt,
                   fmt::format("{}: the file ended before the size it had under the lock", file.path()));
  return success();
}

/// The magic, made durable with the new file's directory entry.
result<void> write_file_header(durable_file& file, log_format format) {
  PSYCH_TRY(file.write_at(magic_of(format), 0));
  PSYCH_TRY(file.sync());
  return file.sync_directory();
}

struct scanned {
  log_format format = log_format::v3;
  std::vector<run_log_record> records;
  std::uint64_t end = magic_bytes;  ///< where the last whole record ends
  /// Format 3: bytes after `end` that are not zero (a torn tail), to be zeroed before appending.
  bool dirty_tail = false;
};

/// One record header as read, before anything about it is trusted.
struct record_header {
  std::uint32_t length = 0;
  std::uint32_t complement = 0;
  std::uint32_t crc = 0;
  std::uint64_t durable = 0;  ///< format 3 only
};

record_header parse_header(log_format format, const unsigned char* bytes) {
  record_header header{.length = boost::endian::load_little_u32(bytes),
                       .complement = boost::endian::load_little_u32(bytes + 4),
                       .crc = boost::endian::load_little_u32(bytes + 8)};
  if (format == log_format::v3) header.durable = boost::endian::load_little_u64(bytes + 12);
  return header;
}

/// Format 3, after the first bad record at `at`: a later record, whole and checked, that says
/// bytes past `at` were already durable when it was written. Such a record proves the bad one had
/// been synced, so a crash cannot explain it. Returns its offset.
std::optional<std::uint64_t> later_proof_of_durability(std::string_view rest, std::uint64_t at) {
  constexpr std::size_t header = header_bytes_of(log_format::v3);
  for (std::size_t q = 1; q + header <= rest.size(); ++q) {
    const auto fields = parse_header(log_format::v3, reinterpret_cast<const unsigned char*>(rest.data() + q));
    if (fields.complement != static_cast<std::uint32_t>(~fields.length) || fields.length > max_payload_bytes ||
        fields.length > rest.size() - q - header || fields.durable <= at || fields.durable > at + q)
      continue;
    if (crc_of(log_format::v3, rest.substr(q + header, fields.length), fields.durable) == fields.crc) return at + q;
  }
  return std::nullopt;
}

/// Walks the records after the magic. At the first bad record:
///  - format 2: a torn tail when it is the last bytes of the file and its header is short, or its
///    header is whole and self-consistent but its payload is short or, ending exactly at end of
///    file, fails its CRC (what a crash mid-append leaves); any other bad record is corruption.
///  - format 3: the end of the records when every byte from it on is zero (the tail); otherwise a
///    torn tail (what is left of records that were never synced), unless a later whole record
///    proves those bytes durable, which makes them corruption.
/// Either way a record whose CRC holds but which does not decode is corruption: it is exactly
/// what some writer meant. A torn tail stops the walk; the caller cuts or zeroes it.
result<scanned> scan(const durable_file& file, std::uint64_t size, log_format format) {
  const std::string& path = file.path();
  scanned out{.format = format};
  const std::size_t header_bytes = header_bytes_of(format);
  std::string payload;
  for (std::size_t number = 1; out.end < size; ++number) {
    const std::uint64_t at = out.end;
    const auto corrupt = [&](std::string_view why) {
      return fail_with(error_kind::run_log_corrupt, fmt::format("{}: record {} at offset {}: {}", path, number, at, why));
    };
    // Format 3: zeros to the end are the tail; anything else left of a crash is torn, unless a
    // later record proves it had been synced.
    const auto stop_v3 = [&](std::string_view why) -> result<scanned> {
      std::string rest(size - at, '\0');
      PSYCH_TRY(read_at(file, rest.data(), rest.size(), at));
      if (rest.find_first_not_of('\0') == std::string::npos) return std::move(out);
      if (const auto proof = later_proof_of_durability(rest, at))
        return corrupt(fmt::format("{}, yet the record at offset {} was written after it was durable", why, *proof));
      out.dirty_tail = true;
      return std::move(out);
    };
    // Why the record at `at` is not whole and checked, and whether format 2 reads that as a torn
    // write. Format 2: a crash leaves a prefix of real bytes, so a whole header is exactly what the
    // writer wrote: disagreeing length fields, or a length over the cap the writer keeps, are
    // damage even at the tail; only once the length is trusted may a payload past end of file, or
    // a CRC mismatch in the file's last bytes, mean a torn write.
    struct fault {
      std::string why;
      bool torn_in_v2;
    };
    const auto stop = [&](const fault& bad) -> result<scanned> {
      if (format == log_format::v3) return stop_v3(bad.why);
      if (bad.torn_in_v2) return std::move(out);
      return corrupt(bad.why);
    };
    if (size - at < header_bytes) return stop({"a short header", true});
    std::array<unsigned char, 20> bytes{};
    PSYCH_TRY(read_at(file, reinterpret_cast<char*>(bytes.data()), header_bytes, at));
    const record_header header = parse_header(format, bytes.data());
    if (header.complement != static_cast<std::uint32_t>(~header.length))
      return stop({fmt::format("length field {:08x} and its complement {:08x} disagree", header.length,
                               header.complement),
                   false});
    if (header.length > max_payload_bytes)
      return stop({fmt::format("length {} exceeds the {}-byte record cap", header.length, max_payload_bytes), false});
    const std::uint64_t end = at + header_bytes + header.length;
    if (end > size) return stop({"the payload runs past end of file", true});
    payload.resize(header.length);
    PSYCH_TRY(read_at(file, payload.data(), header.length, at + header_bytes));
    if (const std::uint32_t actual = crc_of(format, payload, header.durable); actual != header.crc)
      return stop({fmt::format("CRC mismatch (stored {:08x}, computed {:08x})", header.crc, actual), end == size});
    if (header.durable > at) return corrupt(fmt::format("it says bytes up to {} were durable before it", header.durable));
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
  file_run_log(durable_file file, scanned contents, std::uint64_t size, file_run_log_sync sync)
      : file_{std::move(file)}, sync_{sync}, format_{contents.format}, end_{contents.end},
        synced_end_{contents.end}, allocated_{std::max(size, contents.end)}, records_{std::move(contents.records)} {}

  file_run_log(const file_run_log&) = delete;
  file_run_log& operator=(const file_run_log&) = delete;

  /// A log no longer written keeps only its records' space. Not synced: after a crash the file
  /// is either cut or still ends in zeros, and both read the same.
  ~file_run_log() override {
    if (format_ == log_format::v3 && !broken_ && allocated_ > end_) (void)file_.truncate(end_);
  }

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
      return fail_with(error_kind::invalid_argument,
                     fmt::format("{}: a record of {} bytes exceeds the {}-byte record cap", file_.path(), payload.size(),
                                 max_payload_bytes));
    // Kept as a reopen will decode it (the codec repairs invalid UTF-8), so records() never
    // changes meaning across a restart.
    PSYCH_TRY(auto stored, decode_payload(payload));

    const std::lock_guard lock{mutex_};
    if (broken_) return fail_with(error_kind::system_call_failed, broken_.value());
    std::string bytes = framed(format_, payload, synced_end_);
    const std::uint64_t record_bytes = bytes.size();
    if (format_ == log_format::v3 && end_ + record_bytes > allocated_) {
      // The tail grows in the same write: the record, then zeros for the records after it.
      const std::uint64_t grown = (end_ + record_bytes + tail_bytes + tail_bytes - 1) / tail_bytes * tail_bytes;
      bytes.resize(grown - end_, '\0');
    }
    if (auto written = file_.write_at(bytes, end_); !written) {
      undo_partial_append(record_bytes);
      return std::move(written).as_failure();
    }
    allocated_ = std::max(allocated_, end_ + bytes.size());
    end_ += record_bytes;
    records_.push_back(std::move(stored));
    if (sync_ == file_run_log_sync::every_record) {
      if (auto synced = file_.sync_data(); !synced) return sync_failed(synced.error());
      synced_end_ = end_;
    }
    return end_;
  }

  /// Group commit. The first thread that needs bytes synced leads: it syncs everything written so
  /// far, with the mutex released so that others keep writing meanwhile. Threads arriving during
  /// its sync wait for it, and the first of them whose bytes it did not cover leads the next,
  /// which covers all of theirs at once.
  result<void> durable_through(std::unique_lock<std::mutex>& lock, std::uint64_t end) {
    for (;;) {
      if (broken_) return fail_with(error_kind::system_call_failed, broken_.value());
      if (synced_end_ >= end) return success();
      if (!syncing_) break;
      synced_.wait(lock);
    }
    syncing_ = true;
    const std::uint64_t covered = end_;  // every byte here was written before the sync begins
    lock.unlock();
    auto synced = file_.sync_data();
    lock.lock();
    syncing_ = false;
    synced_.notify_all();
    if (!synced) return sync_failed(synced.error());
    synced_end_ = covered;
    return success();
  }

  /// After a failed sync the kernel may have dropped the pages it could not write and reports the
  /// error once: neither a retry nor what is in memory can be trusted any more, so the log takes no
  /// more records (a reopen reads what the file really holds).
  boost::outcome_v2::failure_type<error> sync_failed(const error& why) {
    broken_ = fmt::format("{} (the log takes no more records)", why.detail);
    return fail_with(error_kind::system_call_failed, broken_.value());
  }

  /// A failed write may have left some of its bytes; the next append must not land after them.
  /// Format 2 cuts them off; format 3 zeroes them, since the tail must stay zeros. If that fails
  /// too, the log refuses further appends rather than journal past damage.
  void undo_partial_append(std::uint64_t record_bytes) {
    if (format_ == log_format::v2) {
      auto cut = file_.truncate(end_);
      if (cut) return;
      broken_ = fmt::format("{} (after a failed append; the log takes no more records)", cut.error().detail);
      return;
    }
    if (const auto size = file_.size()) allocated_ = std::max(allocated_, size.value());
    const std::string zeros(std::min(record_bytes, allocated_ - end_), '\0');
    auto zeroed = file_.write_at(zeros, end_);
    if (zeroed) return;
    broken_ = fmt::format("{} (zeroing a failed append; the log takes no more records)", zeroed.error().detail);
  }

  durable_file file_;
  file_run_log_sync sync_;
  log_format format_;
  mutable std::mutex mutex_;
  std::condition_variable synced_;  ///< a leader's sync ended
  std::uint64_t end_;               ///< where the last whole record written ends
  std::uint64_t synced_end_;        ///< every byte before this is durable
  std::uint64_t allocated_;         ///< the file's size; format 3: zeros from end_ to here
  bool syncing_ = false;            ///< a leader is in its sync, with the mutex released
  std::vector<run_log_record> records_;
  std::optional<std::string> broken_;
};

/// A file shorter than the magic is a creation that never finished (or has not started): write
/// the magic, provided what is there is a prefix of it and not someone else's file. Returns the
/// file's format: a new file is format 3, or format 2 for the fsync-per-record baseline, which
/// stands for how the log worked before format 3.
result<log_format> check_or_write_magic(durable_file& file, std::uint64_t size, file_run_log_sync sync) {
  const std::string& path = file.path();
  std::string head(std::min<std::uint64_t>(size, magic_bytes), '\0');
  PSYCH_TRY(read_at(file, head.data(), head.size(), 0));
  if (head == magic_v2) return log_format::v2;
  if (head == magic_v3) return log_format::v3;
  if (head == magic_v1)
    return fail_with(error_kind::run_log_corrupt,
                   fmt::format("{}: offset 0: run log format 1 is not read by this version", path));
  const log_format fresh = sync == file_run_log_sync::every_record ? log_format::v2 : log_format::v3;
  if (head.size() == magic_bytes || !magic_of(fresh).starts_with(head))
    return fail_with(error_kind::run_log_corrupt, fmt::format("{}: offset 0: bad magic (not a psych run log)", path));
  PSYCH_TRY(write_file_header(file, fresh));
  return fresh;
}

}  // namespace

result<std::unique_ptr<run_log>> open_file_run_log(const std::string& path, file_run_log_sync sync) {
  PSYCH_TRY(auto file, durable_file::open_exclusive(path, "run log"));
  PSYCH_TRY(const std::uint64_t found, file.size());
  const auto size = std::max(found, std::uint64_t{magic_bytes});
  PSYCH_TRY(const log_format format, check_or_write_magic(file, found, sync));

  PSYCH_TRY(auto contents, scan(file, size, format));
  if (format == log_format::v2 && contents.end < size) {
    // A torn tail: cut it off so the next append follows a whole record.
    PSYCH_TRY(file.truncate(contents.end));
    PSYCH_TRY(file.sync());
  }
  if (contents.dirty_tail) {
    // Format 3: what a crash left of unsynced records becomes tail again, so a later record can
    // never be read as following them.
    PSYCH_TRY(file.write_at(std::string(size - contents.end, '\0'), contents.end));
    PSYCH_TRY(file.sync_data());
  }
  const std::uint64_t kept = format == log_format::v2 ? contents.end : size;
  return std::unique_ptr<run_log>{std::make_unique<file_run_log>(std::move(file), std::move(contents), kept, sync)};
}

}  // namespace psych
