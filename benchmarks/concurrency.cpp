// Concurrency: N executions of `return 1` started at once on one sandbox, beside the same N run
// one after another, in one run. Prints failures (which must be zero), executions per second
// both ways and their ratio, and one machine-readable line per figure ("BENCH name value unit").
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "psych/host/sandbox.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

struct tally {
  double seconds = 0;
  int failures = 0;
  std::string first_failure;
};

bool run_once(psych::sandbox& sandbox, const psych::execution_terms& terms, std::string& why) {
  const auto result = sandbox.run({.program = "return 1", .terms = terms});
  if (result.ok() && result.value && result.value->text == "1") return true;
  why = result.failure ? result.failure->message : "no value";
  return false;
}

tally sequential(psych::sandbox& sandbox, const psych::execution_terms& terms, int n) {
  tally t;
  const auto start = clock_type::now();
  for (int i = 0; i < n; ++i) {
    std::string why;
    if (!run_once(sandbox, terms, why) && t.failures++ == 0) t.first_failure = why;
  }
  t.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  return t;
}

tally concurrent(psych::sandbox& sandbox, const psych::execution_terms& terms, int n) {
  tally t;
  std::atomic<int> failures{0};
  std::vector<std::string> reasons(static_cast<std::size_t>(n));
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      if (!run_once(sandbox, terms, reasons[static_cast<std::size_t>(i)])) ++failures;
    });
  const auto start = clock_type::now();
  go = true;
  for (auto& thread : threads) thread.join();
  t.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  t.failures = failures;
  for (const auto& why : reasons)
    if (!why.empty()) {
      t.first_failure = why;
      break;
    }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 32;
  int status = 0;
  for (const auto& [backend, level] : {std::pair{"linux-namespaces", psych::isolation_level::isolated},
                                       std::pair{"linux-process", psych::isolation_level::process}}) {
    psych::local_sandbox_options options;
    options.backend = backend;
    options.isolation = level;
    auto made = psych::local_sandbox(options);
    if (!made) {
      fmt::print("{}: not measured: {}\n", backend, made.error().message());
      continue;
    }
    auto& sandbox = *made.value();
    const auto offer = sandbox.offer();
    const auto terms = std::get<psych::execution_terms>(
        psych::intersect_terms(offer, {.limits = offer.limit_ceiling}, {.isolation = level}, {}));
    const auto alone = sequential(sandbox, terms, n);
    const auto together = concurrent(sandbox, terms, n);
    const auto name = std::string(psych::name_of(level));
    fmt::print("{} ({}), {} executions of `return 1`:\n", name, backend, n);
    fmt::print("  sequential  {:7.3f} s  {:6.1f} executions/s  failures {}\n", alone.seconds, n / alone.seconds,
               alone.failures);
    fmt::print("  concurrent  {:7.3f} s  {:6.1f} executions/s  failures {}\n", together.seconds, n / together.seconds,
               together.failures);
    fmt::print("  concurrent throughput / sequential: {:.2f}x\n", alone.seconds / together.seconds);
    for (const auto* t : {&alone, &together})
      if (t->failures) fmt::print("  first failure: {}\n", t->first_failure);
    fmt::print("BENCH concurrent_{}_failures {} count\n", name, together.failures);
    fmt::print("BENCH concurrent_{}_per_second {:.1f} 1/s\n", name, n / together.seconds);
    fmt::print("BENCH sequential_{}_per_second {:.1f} 1/s\n", name, n / alone.seconds);
    fmt::print("BENCH concurrent_{}_ratio_to_sequential {:.2f} x\n", name, alone.seconds / together.seconds);
    if (together.failures || alone.failures) status = 1;
  }
  return status;
}
