// The run log in memory (run_log.hpp): records kept in order under a lock, each durable as soon as
// it is appended, for as long as the process lives.
#include <mutex>

#include "psych/host/run_log.hpp"

namespace psych {
namespace {

class memory_run_log final : public run_log {
 public:
  result<void> append(const run_log_record& record) override {
    std::lock_guard lock(mutex_);
    records_.push_back(record);
    return success();
  }
  result<std::vector<run_log_record>> records() const override {
    std::lock_guard lock(mutex_);
    return records_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<run_log_record> records_;
};

}  // namespace

std::unique_ptr<run_log> open_memory_run_log() { return std::make_unique<memory_run_log>(); }

}  // namespace psych
