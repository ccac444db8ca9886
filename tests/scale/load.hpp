#pragma once
// The load tests/scale and benchmarks/scale put on a cluster: executions of one program per index n,
// many at once through one remote_sandbox client, each calling bound tools that count its side
// effects (an execution run twice would show) and say where it ran.
#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/hana/adapt_struct.hpp>

#include "cluster.hpp"
#include "psych/host/function_tools.hpp"
#include "psych/host/remote_sandbox.hpp"

struct mark_args {
  long n = 0;
  static constexpr std::array<std::string_view, 1> required_members{"n"};
};
BOOST_HANA_ADAPT_STRUCT(mark_args, n);

struct begin_args {
  long n = 0;
  std::string where;
  static constexpr std::array<std::string_view, 2> required_members{"n", "where"};
};
BOOST_HANA_ADAPT_STRUCT(begin_args, n, where);

namespace scale_test {

using clock = std::chrono::steady_clock;

/// The bound tools. `mark(n)` answers 2n and counts its calls per n: a program that ran twice
/// would call it twice. `begin(n, where)` records that execution n has begun and, from its working
/// directory (the cluster's children/<replica>/...), which replica runs it.
struct marker {
  explicit marker(std::size_t executions);
  struct beginning {
    std::string replica;  ///< empty: it has not begun
    clock::time_point at;
  };
  /// Execution n's begin, as recorded now.
  beginning begun_of(std::size_t n) const {
    std::lock_guard lock(mutex);
    return begun[n];
  }
  clock::time_point marked_at_of(std::size_t n) const {
    std::lock_guard lock(mutex);
    return marked_at[n];
  }
  std::vector<std::atomic<int>> calls;
  std::unique_ptr<psych::function_tools> tools;

 private:
  psych::tool_answer<long> mark(const mark_args& a);
  psych::tool_answer<bool> begin(const begin_args& a);

  mutable std::mutex mutex;
  std::vector<beginning> begun;
  std::vector<clock::time_point> marked_at;
};

/// The short program of the load and the benchmark: one call of `mark(n)`, then 2n + 1.
std::string marking_program(long n);

/// What one execution came back as, and when it was sent.
struct outcome {
  std::string id;
  bool ran = false;  ///< run() returned
  bool ok = false;
  std::optional<psych::failure_kind> kind;
  std::string value, message;
  clock::time_point started, ended;
  double sent_epoch = 0;  ///< when it was sent, in seconds since the epoch (as Python's time.time())
};

/// Executions 0, 1, 2, ... through `client`, `in_flight` at a time, until `limit` or until
/// `more()` says no. Execution n runs `program(n)` under the id `prefix-n`, with `wall_seconds`.
struct load {
  std::string prefix;
  std::size_t limit = 0;
  int in_flight = 24;
  std::function<std::string(long)> program;
  std::function<bool()> more = [] { return true; };
  double wall_seconds = 10;
};

std::vector<outcome> run_load(psych::sandbox& client, marker& side_effects, const load& plan);

/// remote_sandbox options for the cluster's HAProxy: its URL, the client token, its CA.
psych::remote_sandbox_options client_options(const cluster& c);

/// A suffix that keeps this run's execution ids apart from an earlier run's.
std::string random_suffix();

}  // namespace scale_test
