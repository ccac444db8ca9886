#pragma once
// The Job Object that holds the program's whole tree: kill on close, no breakaway, an active
// process limit, committed memory per job and per process, user CPU time per job and per process,
// and UI restrictions. What the launcher reports is what QueryInformationJobObject reads back
// after setting it, never what it asked for.
#include <cstdint>

#include <windows.h>

#include "setup_error.hpp"
#include "handles.hpp"
#include "job_readback.hpp"
#include "psych/limits.hpp"
#include "psych/reports.hpp"

namespace psych::windows {

/// What the job's accounting says of the tree so far.
struct job_accounting {
  std::int64_t active_processes = 0;
  double user_seconds = 0;
  double kernel_seconds = 0;
};

class execution_job {
 public:
  /// An unnamed job with every limit of `limits` set, then read back.
  static setup_result<execution_job> create(const sandbox_limits& limits);

  [[nodiscard]] HANDLE handle() const noexcept { return job_.get(); }
  [[nodiscard]] const job_limits_read_back& read_back() const noexcept { return read_back_; }

  /// Puts a process created suspended into the job, before it ran an instruction.
  [[nodiscard]] setup_result<void> assign(HANDLE process) const;

  [[nodiscard]] setup_result<job_accounting> accounting() const;

  /// The processes in the job now but `child` (the interpreter) and console hosts (conhost.exe): a
  /// child started without a window still gets a hidden console, whose host Windows (and Wine) may
  /// count in its job. These are the program's descendants.
  [[nodiscard]] setup_result<std::int64_t> descendants_of(std::int64_t child) const;

  /// The tree's user CPU time reached the per-job limit the job read back (the job ended it).
  [[nodiscard]] bool cpu_limit_reached(const job_accounting& now) const;

  /// Ends every process in the job and waits until the job's accounting counts none, at most
  /// `patience_ms`. Returns the processes still counted then: 0 is a verified empty tree.
  [[nodiscard]] std::int64_t kill_and_verify_empty(DWORD patience_ms) const;

 private:
  explicit execution_job(unique_handle job) : job_(std::move(job)) {}
  setup_result<void> read_limits_back();

  unique_handle job_;
  job_limits_read_back read_back_;
};

}  // namespace psych::windows
