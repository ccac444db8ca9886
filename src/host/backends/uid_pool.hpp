#pragma once
// The identities a root worker's children run as. Per execution: each execution holds one uid
// (and the gid of the same number) from a range reserved for psych, alone, until its process
// tree is verified dead. Shared: every execution runs as one configured uid.
//
// Holding is an exclusive flock on <lock_dir>/<uid>.lock, kept for the execution's lifetime:
// it keeps threads of this process apart (flock locks belong to an open file description, and
// each lease opens its own) and other workers on the host that name the same lock_dir. A uid
// whose lock is free is still skipped while any process of it is alive (a stray the lock does
// not know of: a crashed worker's tree, or somebody else's use of the number). The lock file's
// content says whether its last holder let it go cleanly; when it did not, what that uid left
// in the shared temporary directories is swept before the uid is handed out again.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "psych/host/sandbox.hpp"
#include "psych/protocol/frames.hpp"
#include "psych/result.hpp"

namespace psych::host {

class uid_pool;

/// One identity held for one execution.
class uid_lease {
 public:
  uid_lease(uid_lease&& other) noexcept;
  uid_lease& operator=(uid_lease&&) = delete;
  ~uid_lease();

  /// `exclusive`: a uid per execution, which no other execution holds meanwhile.
  [[nodiscard]] protocol::identity identity() const { return {uid_, gid_, exclusive_}; }

  /// Lets the uid go once no process of it is left (waiting briefly for the dying) and what it
  /// left in the shared temporary directories is swept. If a process survives, the uid stays
  /// held by the pool, out of use until it is gone, and the sentence returned says so.
  std::optional<std::string> release();

 private:
  friend class uid_pool;
  uid_lease(std::shared_ptr<uid_pool> pool, std::int64_t uid, std::int64_t gid, bool exclusive, int fd)
      : pool_(std::move(pool)), uid_(uid), gid_(gid), exclusive_(exclusive), fd_(fd) {}
  std::shared_ptr<uid_pool> pool_;
  std::int64_t uid_, gid_;
  bool exclusive_;
  int fd_;
};

class uid_pool : public std::enable_shared_from_this<uid_pool> {
 public:
  /// A uid per execution from `range`. Makes the lock directory if it is missing.
  static result<std::shared_ptr<uid_pool>> per_execution(const uid_range& range);
  /// One uid for every execution, under a shared lock in `lock_dir`.
  static result<std::shared_ptr<uid_pool>> shared(std::int64_t uid, std::int64_t gid, const std::string& lock_dir);

  uid_pool(const uid_pool&) = delete;
  uid_pool& operator=(const uid_pool&) = delete;
  ~uid_pool();

  /// An identity for one execution. Per execution, none free is a sandbox_setup error that says
  /// the range is exhausted; never a uid somebody else holds.
  result<uid_lease> acquire();

  /// The range and how many of it are free, held and stray now.
  run_as_report report();

 private:
  friend class uid_lease;
  struct held_back {
    std::int64_t uid;
    int fd;
  };
  uid_pool(bool per_execution, std::int64_t first, std::int64_t gid_first, std::int64_t count, std::string lock_dir)
      : per_execution_(per_execution), first_(first), gid_first_(gid_first), count_(count),
        lock_dir_(std::move(lock_dir)) {}
  std::string lock_path(std::int64_t uid) const;
  std::optional<std::string> let_go(std::int64_t uid, int fd);
  void retry_held_back();

  const bool per_execution_;
  const std::int64_t first_, gid_first_, count_;
  const std::string lock_dir_;
  std::mutex mutex_;
  std::int64_t cursor_ = 0;  ///< where the next search starts: the least recently handed out first
  std::vector<held_back> held_back_;
};

/// Every uid and gid (real, effective, saved, filesystem) of a live process on this host, as
/// /proc shows them. Zombies count: they still hold their place in RLIMIT_NPROC.
std::vector<std::int64_t> ids_in_use();

}  // namespace psych::host
