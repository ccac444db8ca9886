// What the command line adds over the library (issue 15's target: at most 1 ms). Interleaved in
// one run, with the system PATH: the bare interpreter, the library's run() of `return 1` on a
// sandbox built once (ISOLATED and PROCESS, pinned), and `psych run` of the same file end to end
// with the same backend pinned, and the floor: exec'ing /bin/true, what any process costs here, of
// which psych run pays one more than run(). Prints medians and the difference, CLI minus library.
//   bench_cli PSYCH_BINARY [rounds]
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: bench_cli PSYCH_BINARY [rounds]\n");
    return 2;
  }
  const std::string cli = argv[1];
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 40;
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("psych-bench-cli-{}", ::getpid());
  std::filesystem::create_directories(dir);
  const auto program = (dir / "one.py").string();
  std::ofstream(program) << "return 1\n";

  std::vector<contender> all;
  std::string python;
  std::vector<std::shared_ptr<psych::sandbox>> keep;
  struct level_case {
    const char* backend;
    psych::isolation_level level;
    const char* tag;
  };
  for (const auto& [backend, level, tag] : {level_case{"linux-namespaces", psych::isolation_level::isolated, "isolated"},
                                            level_case{"linux-process", psych::isolation_level::process, "process"}}) {
    auto sandbox = psych::bench::pinned_sandbox(backend, level);
    if (!sandbox) continue;
    if (python.empty()) python = sandbox->describe().interpreter;
    keep.push_back(sandbox);
    all.push_back({fmt::format("library run() ({})", backend), fmt::format("cli_library_{}_ms", tag),
                   psych::bench::return_one(sandbox, level), {}, {}});
    all.push_back({fmt::format("psych run --backend {}", backend), fmt::format("cli_psych_run_{}_ms", tag),
                   [cli, backend = std::string(backend), program] {
                     return psych::bench::spawn_and_wait({cli, "run", "--backend", backend, program});
                   },
                   {}, {}});
  }
  if (python.empty()) return 2;
  all.insert(all.begin(), contender{"python3 -I -S -c pass", "cli_bare_ms",
                                    [&] { return psych::bench::spawn_and_wait({python, "-I", "-S", "-c", "pass"}); }, {}, {}});
  all.push_back({"/bin/true (a process, the floor)", "cli_floor_true_ms",
                 [] { return psych::bench::spawn_and_wait({"/bin/true"}); }, {}, {}});

  if (!psych::bench::measure_interleaved(all, rounds)) {
    fmt::print(stderr, "bench_cli: a run failed\n");
    std::filesystem::remove_all(dir);
    return 1;
  }
  std::filesystem::remove_all(dir);

  fmt::print("`return 1`, {} interleaved rounds, interpreter {}\n", rounds, python);
  const double bare = median(all.front().seconds);
  for (const auto& one : all) {
    const double m = median(one.seconds);
    fmt::print("  {:<44} {:7.2f} ms  {:4.2f}x bare\n", one.label, m * 1e3, m / bare);
    fmt::print("BENCH {} {:.3f} ms\n", one.bench_name, m * 1e3);
  }
  const double floor_ms = median(all.back().seconds) * 1e3;
  for (std::size_t i = 1; i + 2 < all.size(); i += 2) {
    const double added = (median(all[i + 1].seconds) - median(all[i].seconds)) * 1e3;
    fmt::print("  psych run adds {:.2f} ms over the library ({}; target <= 1 ms; a process alone: {:.2f} ms)\n",
               added, all[i].label, floor_ms);
    fmt::print("BENCH {}_added_ms {:.3f} ms\n", all[i + 1].bench_name.substr(0, all[i + 1].bench_name.size() - 3),
               added);
  }
  return 0;
}
