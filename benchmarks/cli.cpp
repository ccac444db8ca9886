// What the command line adds over the library (issue 15's target: at most 1 ms). Interleaved in
// one run, with the system PATH: the bare interpreter, the library's run() of `return 1` on a
// sandbox built once (ISOLATED and PROCESS, pinned), and `psych run` of the same file end to end
// with the same backend pinned, and the floor: exec'ing /bin/true, what any process costs here, of
// which psych run pays one more than run(). Prints medians and the difference, CLI minus library.
// As root with a container runtime and psych's image, also the container backend: a bare
// `podman run --rm --network=none IMAGE python3 -I -S -c pass`, the library's run() on a
// container_sandbox built once, and `psych run --backend container`, with their ratios to the
// bare container.
//   bench_cli PSYCH_BINARY [rounds]
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "psych/host/container_sandbox.hpp"
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
  // The container, where it can run: the bare runtime, the library, psych run.
  std::optional<std::size_t> container_bare;
  if (::geteuid() == 0) {
    const psych::container_sandbox_options defaults;
    const auto found = psych::detect_container_runtime(defaults);
    auto made = psych::container_sandbox(defaults);
    if (!found.available) fmt::print("  (container not measured: {})\n", found.problem);
    else if (!made) fmt::print("  (container not measured: {})\n", made.error().message());
    if (found.available && made) {
      std::shared_ptr<psych::sandbox> sandbox = std::move(made).value();
      keep.push_back(sandbox);
      container_bare = all.size();
      all.push_back({fmt::format("{} run --rm --network=none (bare)", found.runtime), "cli_bare_container_ms",
                     [path = found.path, image = defaults.image] {
                       return psych::bench::spawn_and_wait(
                           {path, "run", "--rm", "--network=none", image, "python3", "-I", "-S", "-c", "pass"});
                     },
                     {}, {}});
      all.push_back({"library run() (container)", "cli_library_container_ms",
                     psych::bench::return_one(sandbox, psych::isolation_level::isolated), {}, {}});
      all.push_back({"psych run --backend container", "cli_psych_run_container_ms",
                     [cli, program] { return psych::bench::spawn_and_wait({cli, "run", "--backend", "container", program}); },
                     {}, {}});
    }
  }
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
  const std::size_t local_end = container_bare.value_or(all.size() - 1);
  for (std::size_t i = 1; i + 1 < local_end; i += 2) {
    const double added = (median(all[i + 1].seconds) - median(all[i].seconds)) * 1e3;
    fmt::print("  psych run adds {:.2f} ms over the library ({}; target <= 1 ms; a process alone: {:.2f} ms)\n",
               added, all[i].label, floor_ms);
    fmt::print("BENCH {}_added_ms {:.3f} ms\n", all[i + 1].bench_name.substr(0, all[i + 1].bench_name.size() - 3),
               added);
  }
  if (container_bare) {
    const double podman = median(all[*container_bare].seconds);
    for (std::size_t i = *container_bare + 1; i <= *container_bare + 2; ++i) {
      fmt::print("  {} is {:.3f}x the bare container (psych run's target: <= 1.15x)\n", all[i].label,
                 median(all[i].seconds) / podman);
      fmt::print("BENCH {}_ratio_to_bare {:.3f} x\n", all[i].bench_name.substr(0, all[i].bench_name.size() - 3),
                 median(all[i].seconds) / podman);
    }
  }
  return 0;
}
