#include "backends/local/prepared_pool.hpp"

#include <algorithm>
#include <future>

#include <fmt/format.h>

#include "backends/backend_support.hpp"

namespace psych::host {

namespace {

using clock = std::chrono::steady_clock;

/// After a failed preparation the next waits this long, doubling up to the maximum: a host that
/// cannot prepare (the interpreter gone, namespaces refused) is not hammered.
constexpr auto first_backoff = std::chrono::milliseconds(500);
constexpr auto max_backoff = std::chrono::seconds(30);

}  // namespace

/// One prepared sandbox: its plan, its session on a thread of its own, and what it ended with.
struct prepared_pool::prepared {
  explicit prepared(preparation made, clock::duration max_age)
      : plan(std::move(made.plan)), identity(std::move(made.identity)), claim(max_age) {
    plan.claim = &claim;
    // The claimant's result at the `exit` report; the launcher's own exit, the directories and the
    // identity are this sandbox's thread's to wait for, off the claimant's path.
    plan.hand_over = [this](session_outcome&& ended) { outcome.set_value(std::move(ended)); };
  }

  /// Starts the session; it calls claim.ready() once graded and waiting, and `ended` last.
  void start(std::function<void(prepared*, std::optional<std::string>)> ended) {
    session = std::jthread([this, ended = std::move(ended)] {
      const auto rest = run_session(plan, stop.get_token());
      // The tree is gone and the result handed over; the identity is let go once nothing of it
      // is left (a survivor keeps it out of use), off the claimant's path. What went wrong after
      // the hand-over (the directories) can only be the pool's to report.
      std::optional<std::string> problem;
      if (identity) problem = identity->release();
      if (!problem && !rest.result.problems.empty()) problem = rest.result.problems.front();
      ended(this, std::move(problem));
    });
  }

  /// The outcome of a claimed session, once it ended; its thread is joined by join().
  session_outcome result() { return outcome.get_future().get(); }
  void join() {
    if (session.joinable()) session.join();
  }

  session_plan plan;
  std::optional<uid_lease> identity;
  claim_point claim;
  std::stop_source stop;  ///< the claiming request's cancellation
  std::promise<session_outcome> outcome;
  std::jthread session;
};

prepared_pool::prepared_pool(prepared_pool_options options, std::function<result<preparation>()> prepare)
    : options_(options), prepare_(std::move(prepare)) {
  counts_.size = options_.size;
  refiller_ = std::thread([this] { refill(); });
}

prepared_pool::~prepared_pool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  refiller_.join();
  // Nothing claims any more: every waiting sandbox aborts its child, and each thread is joined.
  std::deque<std::unique_ptr<prepared>> waiting;
  std::list<std::unique_ptr<prepared>> ended;
  {
    std::lock_guard lock(mutex_);
    waiting.swap(ready_);
    ended.swap(ended_);
  }
  for (auto& sandbox : waiting) sandbox->claim.retire();
  for (auto& sandbox : waiting) sandbox->join();
  for (auto& sandbox : ended) sandbox->join();
}

void prepared_pool::refill() {
  clock::duration backoff = first_backoff;
  std::unique_lock lock(mutex_);
  for (;;) {
    // The ended ones are joined here, off the requests' path.
    while (!ended_.empty()) {
      auto sandbox = std::move(ended_.front());
      ended_.pop_front();
      lock.unlock();
      sandbox->join();
      sandbox.reset();
      lock.lock();
    }
    if (stopping_) return;
    if (ready_.size() >= options_.size) {
      changed_.wait(lock, [this] { return stopping_ || !ended_.empty() || ready_.size() < options_.size; });
      continue;
    }
    lock.unlock();
    // One at a time, so that refilling after a burst does not start many interpreters at once
    // beside the executions the burst is running.
    std::unique_ptr<prepared> sandbox;
    std::string failure;
    if (auto made = prepare_(); !made) {
      failure = made.error().message();
    } else {
      sandbox = std::make_unique<prepared>(std::move(made).value(),
                                           std::chrono::duration_cast<clock::duration>(
                                               std::chrono::duration<double>(options_.max_age_seconds)));
      sandbox->start([this](prepared* which, std::optional<std::string> clean_up_problem) {
        ended_unclaimed(which, std::move(clean_up_problem));
      });
      if (!sandbox->claim.wait_ready()) {
        failure = sandbox->claim.failure();
        sandbox->join();
        sandbox.reset();
      }
    }
    lock.lock();
    if (sandbox) {
      backoff = first_backoff;
      counts_.last_failure.clear();
      // It may have expired or died between wait_ready() and now, when ended_unclaimed() could
      // not find it here: then it is joined, not offered.
      if (sandbox->claim.waiting()) {
        ready_.push_back(std::move(sandbox));
      } else {
        ++counts_.retired;
        ended_.push_back(std::move(sandbox));
      }
      continue;
    }
    counts_.last_failure = failure;
    changed_.wait_for(lock, backoff, [this] { return stopping_; });
    backoff = std::min<clock::duration>(backoff * 2, std::chrono::duration_cast<clock::duration>(max_backoff));
  }
}

void prepared_pool::ended_unclaimed(prepared* which, std::optional<std::string> clean_up_problem) {
  {
    std::lock_guard lock(mutex_);
    if (clean_up_problem) counts_.last_clean_up_problem = std::move(*clean_up_problem);
    const auto found = std::find_if(ready_.begin(), ready_.end(), [which](const auto& p) { return p.get() == which; });
    if (found == ready_.end()) return;  // claimed, or never ready: its owner joins it
    ++counts_.retired;
    ended_.push_back(std::move(*found));
    ready_.erase(found);
  }
  changed_.notify_all();
}

void prepared_pool::bury(std::unique_ptr<prepared> sandbox) {
  {
    std::lock_guard lock(mutex_);
    ended_.push_back(std::move(sandbox));
  }
  changed_.notify_all();
}

std::optional<sandbox_result> prepared_pool::run(const run_request& request, const execution_terms& terms,
                                                 std::stop_token stop) {
  for (;;) {
    std::unique_ptr<prepared> sandbox;
    {
      std::lock_guard lock(mutex_);
      if (ready_.empty()) {
        ++counts_.missed;
        return std::nullopt;
      }
      // Every one was launched with the ceiling's network; a request for another is built on request.
      if (ready_.front()->plan.terms.network != terms.network) return std::nullopt;
      sandbox = std::move(ready_.front());
      ready_.pop_front();
    }
    changed_.notify_all();  // a place is free: the refill starts the next one now
    // The request's plan is the prepared one's launch (same launcher, interpreter, identity,
    // environment, directories) with the request's terms and program.
    session_plan claimed = sandbox->plan;
    claimed.claim = nullptr;
    claimed.hand_over = nullptr;
    claimed.terms = terms;
    add_request(claimed, request);
    if (!sandbox->claim.claim(claimed)) {
      // It expired, or ended, in the moment before the claim: never used.
      {
        std::lock_guard lock(mutex_);
        ++counts_.retired;
      }
      bury(std::move(sandbox));
      continue;
    }
    auto outcome = [&] {
      std::stop_callback cancel(stop, [&sandbox] { sandbox->stop.request_stop(); });
      return sandbox->result();
    }();
    bury(std::move(sandbox));  // its thread lets the identity go; the refill joins it
    if (outcome.prepared_lost) {
      std::lock_guard lock(mutex_);
      ++counts_.retired;
      continue;  // nothing of the program reached it: the next one, or a sandbox built on request
    }
    {
      std::lock_guard lock(mutex_);
      ++counts_.claimed;
    }
    outcome.result.unavailable_bindings = request.unavailable_bindings;
    return std::move(outcome.result);
  }
}

pool_report prepared_pool::report() const {
  std::lock_guard lock(mutex_);
  auto report = counts_;
  report.ready = ready_.size();
  return report;
}

}  // namespace psych::host
