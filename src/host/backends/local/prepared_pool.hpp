#pragma once
// Prepared sandboxes for one local backend (docs/pools.md): each is launched, contained, graded
// against the backend's ceiling and left waiting on its own thread (a prepared session,
// session.hpp) until one request claims it. Single use: after that execution it is destroyed.
// One preparation at a time refills the pool in the background; one unclaimed past the maximum
// age is retired and replaced; a pool that cannot prepare says why and serves nothing, and the
// caller builds per request, as without a pool.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>

#include "psych/host/sandbox.hpp"
#include "execution/session.hpp"
#include "backends/uid_pool.hpp"

namespace psych::host {

/// What one prepared sandbox is launched with: the ceiling's plan and the identity it holds.
struct preparation {
  session_plan plan;
  std::optional<uid_lease> identity;
};

/// The pool's state, for describe().
struct pool_report {
  std::size_t size = 0;
  std::size_t ready = 0;
  std::uint64_t claimed = 0;      ///< executions a prepared sandbox ran
  std::uint64_t missed = 0;       ///< requests that found none ready and were built on request
  std::uint64_t retired = 0;      ///< unclaimed past the maximum age, or a sandbox that ended while waiting
  std::string last_failure;       ///< the newest preparation that failed; empty once one succeeds
  std::string last_clean_up_problem;  ///< after a sandbox's end: an identity a survivor kept, or directories left
};

class prepared_pool {
 public:
  /// `prepare`: the plan of one more sandbox (called on the pool's thread, one at a time).
  prepared_pool(prepared_pool_options options, std::function<result<preparation>()> prepare);
  ~prepared_pool();  ///< retires every waiting sandbox and waits until each is gone
  prepared_pool(const prepared_pool&) = delete;
  prepared_pool& operator=(const prepared_pool&) = delete;

  /// Runs `request` (the backend's terms, already within its ceiling) on a prepared sandbox:
  /// nullopt when none was ready or each it tried had ended before its program was sent, and
  /// the caller builds one on request.
  std::optional<sandbox_result> run(const run_request& request, const execution_terms& terms, std::stop_token stop);

  pool_report report() const;

 private:
  struct prepared;

  void refill();
  /// A ready sandbox whose session ended unclaimed (it expired, or its child died) goes to ended_.
  void ended_unclaimed(prepared* which, std::optional<std::string> clean_up_problem);
  void bury(std::unique_ptr<prepared> sandbox);

  const prepared_pool_options options_;
  const std::function<result<preparation>()> prepare_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::unique_ptr<prepared>> ready_;
  std::list<std::unique_ptr<prepared>> ended_;  ///< retired or expired, for the refill thread to join
  pool_report counts_;
  bool stopping_ = false;
  std::thread refiller_;
};

}  // namespace psych::host
