// Cold execution: an end-to-end run() of `return 1` at each local isolation level beside the bare
// interpreter (and, for reference, the interpreter under `unshare -Urnmpf`), interleaved in one
// run so that machine noise hits them all alike. Prints medians, the ratios, and one
// machine-readable line per figure ("BENCH name value unit").
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "psych/host/sandbox.hpp"

#include "interleaved.hpp"
#include "median.hpp"
#include "pinned.hpp"
#include "spawn.hpp"

namespace {

using psych::bench::contender;
using psych::bench::median;
using psych::bench::spawn_and_wait;

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 40;
  auto probe = psych::local_sandbox({});
  if (!probe) {
    fmt::print(stderr, "cold_start: {}\n", probe.error().message());
    return 2;
  }
  const std::string python = probe.value()->describe().interpreter;

  std::vector<contender> all;
  all.push_back({"python3 -I -S -c pass", "cold_bare_isolated_ms",
                 [&] { return spawn_and_wait({python, "-I", "-S", "-c", "pass"}); }, {}, {}});
  all.push_back({"python3 -c pass", "cold_bare_default_ms", [&] { return spawn_and_wait({python, "-c", "pass"}); }, {}, {}});
  if (::access("/usr/bin/unshare", X_OK) == 0)
    all.push_back({"unshare -Urnmpf python3 -I -S -c pass", "cold_unshare_ms",
                   [&] { return spawn_and_wait({"/usr/bin/unshare", "-Urnmpf", python, "-I", "-S", "-c", "pass"}); },
                   {}, {}});
  // The library's run(): what `psych run` adds on top is bench_cli's to measure.
  struct level_case {
    const char* backend;
    psych::isolation_level level;
    const char* bench_name;
  };
  for (const auto& [backend, level, bench_name] :
       {level_case{"linux-process", psych::isolation_level::process, "cold_process_run_ms"},
        level_case{"linux-namespaces", psych::isolation_level::isolated, "cold_isolated_run_ms"}})
    if (auto sandbox = psych::bench::pinned_sandbox(backend, level))
      all.push_back({fmt::format("library run() ({}, {})", psych::name_of(level), backend), bench_name,
                     psych::bench::return_one(sandbox, level), {}, {}});

  if (!psych::bench::measure_interleaved(all, rounds)) return 1;

  fmt::print("cold execution of `return 1`, {} interleaved rounds, interpreter {}\n", rounds, python);
  const double bare = median(all.front().seconds);
  for (const auto& one : all) {
    const double m = median(one.seconds);
    fmt::print("  {:<44} {:8.2f} ms  {:5.2f}x\n", one.label, m * 1e3, m / bare);
    fmt::print("BENCH {} {:.3f} ms\n", one.bench_name, m * 1e3);
  }
  const auto ratio_of = [&](const std::string& bench_name, const char* target) {
    for (const auto& one : all)
      if (one.bench_name == bench_name) {
        const double ratio = median(one.seconds) / bare;
        fmt::print("BENCH {} {:.3f} x\n", bench_name.substr(0, bench_name.size() - 3) + "_ratio_to_bare_isolated", ratio);
        fmt::print("  {}: {:.2f}x bare python3 -I -S (target <= {})\n", one.label, ratio, target);
      }
  };
  ratio_of("cold_process_run_ms", "1.50x");
  ratio_of("cold_isolated_run_ms", "1.35x");
  return 0;
}
