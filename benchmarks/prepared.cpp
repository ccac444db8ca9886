// Prepared sandboxes (docs/pools.md): run() of `return 1` on a claimed ISOLATED (and PROCESS)
// sandbox beside the same backend built on request and the bare interpreter, interleaved in one
// run. Requests arrive slower than the pool refills (a pause, not timed, before each contender,
// so that no refill runs beside a timed one), so every one finds a prepared sandbox; the targets
// are a median of at most 0.25x and a p99 of at most 0.6x bare `python3 -I -S -c pass`. Then a
// burst that outruns the refill: back-to-back requests against a pool of 2, whose latency should
// fall back to the on-request path, not below it.
//   bench_prepared [rounds]
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "psych/host/sandbox.hpp"

#include "interleaved.hpp"
#include "median.hpp"
#include "pinned.hpp"
#include "spawn.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using psych::bench::contender;
using psych::bench::median;
using psych::bench::return_one;

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const auto at = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(at, v.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 100;
  auto probe = psych::local_sandbox({});
  if (!probe) {
    fmt::print(stderr, "prepared: {}\n", probe.error().message());
    return 2;
  }
  const std::string python = probe.value()->describe().interpreter;
  probe.value().reset();

  // Slower than the refill: a pool refills one sandbox in about the cold path's time. Every
  // contender waits as long before it is timed, so that none is measured beside a refill started
  // by the one before it (the refill's CPU would slow the bare interpreter and the on-request path
  // as much as it slows a claim).
  constexpr auto steady_pause = std::chrono::milliseconds(150);
  std::vector<contender> all;
  all.push_back({"python3 -I -S -c pass", "prepared_bare_ms",
                 [&] { return psych::bench::spawn_and_wait({python, "-I", "-S", "-c", "pass"}); }, steady_pause,
                 {}});
  struct level_case {
    const char* name;
    psych::isolation_level level;
    const char* tag;
  };
  for (const auto& [name, level, tag] : {level_case{"linux-namespaces", psych::isolation_level::isolated, "isolated"},
                                         level_case{"linux-process", psych::isolation_level::process, "process"}}) {
    auto cold = psych::bench::pinned_sandbox(name, level);
    auto pooled = psych::bench::pinned_sandbox(name, level, 2);
    if (!cold || !pooled) continue;
    all.push_back({fmt::format("{} built on request", name), fmt::format("prepared_{}_cold_ms", tag),
                   return_one(cold, level), steady_pause, {}});
    all.push_back({fmt::format("{} prepared (pool 2)", name), fmt::format("prepared_{}_claimed_ms", tag),
                   return_one(pooled, level), steady_pause, {}});
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the pools fill
  if (!psych::bench::measure_interleaved(all, rounds)) return 1;

  fmt::print("`return 1` in run(), {} interleaved rounds, interpreter {}; prepared requests {} ms apart\n", rounds,
             python, steady_pause.count());
  const double bare = median(all.front().seconds);
  for (const auto& one : all) {
    const double m = median(one.seconds), p99 = percentile(one.seconds, 0.99);
    fmt::print("  {:<44} median {:7.2f} ms ({:4.2f}x)  p99 {:7.2f} ms ({:4.2f}x)\n", one.label, m * 1e3, m / bare,
               p99 * 1e3, p99 / bare);
    fmt::print("BENCH {} {:.3f} ms\n", one.bench_name, m * 1e3);
    fmt::print("BENCH {} {:.3f} ms\n", one.bench_name.substr(0, one.bench_name.size() - 3) + "_p99_ms", p99 * 1e3);
    fmt::print("BENCH {}_ratio_to_bare {:.3f} x\n", one.bench_name.substr(0, one.bench_name.size() - 3), m / bare);
    fmt::print("BENCH {}_p99_ratio_to_bare {:.3f} x\n", one.bench_name.substr(0, one.bench_name.size() - 3),
               p99 / bare);
  }

  // A burst: back-to-back requests against a pool of 2 outrun its refill after the first two.
  if (auto pooled = psych::bench::pinned_sandbox("linux-namespaces", psych::isolation_level::isolated, 2)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const auto once = return_one(pooled, psych::isolation_level::isolated);
    std::vector<double> burst;
    for (int i = 0; i < 20; ++i) {
      const auto start = clock_type::now();
      if (!once()) return 1;
      burst.push_back(std::chrono::duration<double>(clock_type::now() - start).count());
    }
    fmt::print("  burst of 20 back-to-back (pool 2): first two {:.2f} / {:.2f} ms, median of the rest {:.2f} ms\n",
               burst[0] * 1e3, burst[1] * 1e3, median(std::vector<double>(burst.begin() + 2, burst.end())) * 1e3);
    fmt::print("BENCH prepared_burst_rest_median_ms {:.3f} ms\n",
               median(std::vector<double>(burst.begin() + 2, burst.end())) * 1e3);
    fmt::print("  {}\n", pooled->describe().mechanisms.back());
  }
  return 0;
}
