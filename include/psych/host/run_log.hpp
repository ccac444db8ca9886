#pragma once
// The run log: one Run's durable, append-only journal of tool calls, direct and in-program alike.
// It is the per-Run half of every binding meter: a call is spent when its `call_started` record is
// durable, whatever happens after, so a worker that dies mid-call cannot hand the next Attempt a
// fresh allowance. An execution's outputs put in the BlobStore afterwards are journalled too
// (`output_preserved`), since they sit on the same `preserved` meter as the calls' recordings. The port lets a deployment put the journal in its own store; the embedded
// default is a file (open_file_run_log, src/host/store/file_run_log.cpp; format in docs/run-log.md).
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "psych/budget.hpp"
#include "psych/open_enum.hpp"
#include "psych/result.hpp"
#include "psych/tool_errors.hpp"

namespace psych {

/// A call is about to reach a tool. Written (durably) before the tool is invoked.
struct call_started {
  std::string call_id;       ///< unique within the Run
  std::string execution_id;  ///< the program's execution; empty for a direct call by the model
  std::string tool;
  std::uint64_t argument_bytes = 0;
  friend bool operator==(const call_started&, const call_started&) = default;
};

/// How a started call ended: its result was handed over ("ok", the default), or it raised a ToolError
/// (the kind's spelling). A log written by another version may name a kind this one does not have:
/// the record is still read, since the tally never looks at the outcome, and the spelling kept.
class call_outcome {
 public:
  call_outcome() = default;
  static call_outcome ok() { return {}; }
  call_outcome(tool_error_kind kind) : error_(kind) {}

  static call_outcome from_spelling(std::string_view spelling) {
    call_outcome out;
    if (spelling != ok_spelling) out.error_ = open_enum<tool_error_kind>::from_spelling(spelling);
    return out;
  }
  bool is_ok() const noexcept { return !error_; }
  /// The ToolError's kind, when it is one this side has.
  std::optional<tool_error_kind> error() const noexcept { return error_ ? error_->known() : std::nullopt; }
  std::string_view spelling() const noexcept { return error_ ? error_->spelling() : ok_spelling; }
  friend bool operator==(const call_outcome&, const call_outcome&) = default;

 private:
  static constexpr std::string_view ok_spelling = "ok";
  std::optional<open_enum<tool_error_kind>> error_;  ///< none: ok
};

/// How a started call ended. Appended without waiting (append_deferred), so it is absent for a
/// call that was in flight when its worker died, and may be for one that ended just before.
struct call_finished {
  std::string call_id;
  call_outcome outcome;
  std::uint64_t produced = 0;    ///< bytes the tool made
  std::uint64_t transfer = 0;    ///< bytes that crossed into the sandbox
  std::uint64_t preserved = 0;   ///< bytes of the result kept in `value_json` (the recording)
  std::string value_json;        ///< the recorded result, when it was preserved
  friend bool operator==(const call_finished&, const call_finished&) = default;
};

/// One of an execution's outputs (stdout, stderr, the value, an artifact) is about to be put in the
/// BlobStore. Written (durably) before the put, so the bytes are spent whether or not it succeeds.
struct output_preserved {
  std::string execution_id;
  std::string item;  ///< "stdout", "stderr", "value" or "artifact:<workspace-relative path>"
  std::uint64_t bytes = 0;
  friend bool operator==(const output_preserved&, const output_preserved&) = default;
};

using run_log_record = std::variant<call_started, call_finished, output_preserved>;

/// The port. A call is spent once its `call_started` is durable, so the caller invokes a tool
/// only after `append` (or `append_deferred` then `sync`) returned for that record. Records keep
/// the order of the appends, and a durable one makes every record before it durable too: a crash
/// can lose only records appended after the last durable append or sync, never one before them.
class run_log {
 public:
  virtual ~run_log() = default;
  /// Appends one record; it and every record before it are durable when this returns successfully.
  virtual result<void> append(const run_log_record& record) = 0;
  /// Appends one record in order without waiting for it to be durable: a later `append` or `sync`
  /// covers it. For records a crash may lose without harm (a `call_finished`: its call then reads
  /// UNKNOWN, which is the safe reading) and for a batch made durable by one `sync`. An
  /// implementation that cannot defer keeps both defaults (durable at once, nothing to sync).
  virtual result<void> append_deferred(const run_log_record& record) { return append(record); }
  /// Makes every record appended so far durable.
  virtual result<void> sync() { return success(); }
  /// Every record appended so far, in order, including those of earlier processes.
  virtual result<std::vector<run_log_record>> records() const = 0;
};

/// The Run's meters while several of its executions run at once (one MCP session's concurrent
/// run_code calls): each execution adds what it spends as it spends it, so every other one reads
/// the Run's total live, and a call is admitted by one check-and-add under the lock, so two
/// programs can never both take the Run's last call. Byte charges are checked against a live
/// reading and added when made (docs/mcp-server.md, "What is metered", says what that allows).
/// It starts at the log's tally; the log stays the record a new Attempt recounts from.
class run_meter {
 public:
  explicit run_meter(meter_readings start = {}) : spent_(start) {}
  run_meter(const run_meter&) = delete;
  run_meter& operator=(const run_meter&) = delete;

  meter_readings read() const {
    std::lock_guard lock(mutex_);
    return spent_;
  }
  void add(const meter_readings& more) {
    std::lock_guard lock(mutex_);
    spent_ += more;
  }
  /// Adds `more` when the Run's ceilings have room for it; otherwise adds nothing and names the
  /// meter it would overrun.
  std::optional<meter_name> charge(const binding_budget& budget, const meter_readings& more) {
    std::lock_guard lock(mutex_);
    if (const auto out = exhausted_by(budget, spent_, more, meter_scope::run)) return out;
    spent_ += more;
    return std::nullopt;
  }
  /// Takes back a charge whose call was then not made (its record could not be written).
  void refund(const meter_readings& charged) {
    std::lock_guard lock(mutex_);
    spent_.calls -= charged.calls, spent_.transfer -= charged.transfer, spent_.produced -= charged.produced,
        spent_.preserved -= charged.preserved;
  }

 private:
  mutable std::mutex mutex_;
  meter_readings spent_;
};

/// One execution's place in its Run: where its calls are journalled, and what the Run had spent
/// before it started (the log's tally then).
struct run_account {
  run_log* log = nullptr;  ///< none: the Run's meters start at `spent_before` and are not durable
  meter_readings spent_before;
  std::string execution_id;  ///< names the execution's calls in the log; unique within the Run
  /// The Run's live meters, shared with the executions running beside this one; none: the Run is
  /// `spent_before` plus this execution's own spending.
  run_meter* live = nullptr;
};

/// What a log says was spent, and which calls have no outcome (their worker died mid-call).
struct run_tally {
  /// calls counted from `call_started`; bytes from `call_finished`, and `output_preserved` for preserved
  meter_readings spent;
  std::vector<call_started> unknown;  ///< started, never finished: UNKNOWN, counted, never re-run
};

/// Pure: the tally of a record sequence.
inline run_tally tally(const std::vector<run_log_record>& records) {
  run_tally out;
  std::vector<call_started> open;
  for (const auto& record : records) {
    if (const auto* started = std::get_if<call_started>(&record)) {
      ++out.spent.calls;
      open.push_back(*started);
      continue;
    }
    if (const auto* output = std::get_if<output_preserved>(&record)) {
      out.spent.preserved += output->bytes;
      continue;
    }
    const auto& finished = std::get<call_finished>(record);
    out.spent.produced += finished.produced;
    out.spent.transfer += finished.transfer;
    out.spent.preserved += finished.preserved;
    std::erase_if(open, [&](const call_started& s) { return s.call_id == finished.call_id; });
  }
  out.unknown = std::move(open);
  return out;
}

/// How the embedded file log makes records durable.
enum class file_run_log_sync {
  /// Group commit: a durable append waits for one fdatasync that covers every record written
  /// before it started, its own and those of every other thread waiting at that moment, and a
  /// deferred append is not synced at all until a later durable append or sync covers it.
  group,
  /// One fdatasync per record, deferred ones included: how the log behaved before group commit.
  /// A file it creates is format 2 (appends that grow it), as the log's were then. Kept only so
  /// that benchmarks/bindings.cpp can print that baseline in the same run.
  every_record,
};

/// A run log held in memory: durable for as long as the process lives, which is as long as a Run
/// lasts where nothing outlives the process (an MCP session of psych mcp, docs/mcp-server.md).
std::unique_ptr<run_log> open_memory_run_log();

/// The embedded default: a file of length-prefixed, checksummed records (docs/run-log.md).
/// Creates the file when absent (format 3: records written into zeros laid ahead of them). What a
/// crash left of unsynced records (a torn tail) is dropped; damage to records that were durable is
/// `run_log_corrupt`, wherever the file can prove it (docs/run-log.md says where it cannot).
result<std::unique_ptr<run_log>> open_file_run_log(const std::string& path,
                                                   file_run_log_sync sync = file_run_log_sync::group);

}  // namespace psych
