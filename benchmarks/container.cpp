// The container backend's cost over the container runtime's own: a container_sandbox run() of
// `return 1` beside a bare `podman run --rm --network=none IMAGE python3 -I -S -c pass`, and what a
// user of the command line meets, `psych run --backend container` of the same program (which
// builds and probes the backend first), with the bare interpreter on the host for scale,
// interleaved in one run. Prints medians, ratios and "BENCH name value unit" lines.
//   bench_container [ROUNDS] [IMAGE]
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "psych/host/container_sandbox.hpp"

#include "median.hpp"
#include "spawn.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

struct contender {
  std::string label;
  std::string bench_name;
  std::function<bool()> once;
  std::vector<double> seconds;
};

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 15;
  psych::container_sandbox_options options;
  if (argc > 2) options.image = argv[2];
  const auto runtime = psych::detect_container_runtime(options);
  if (!runtime.available) {
    fmt::print("bench_container: not measured: {}\n", runtime.problem);
    return 77;
  }
  auto made = psych::container_sandbox(options);
  if (!made) {
    fmt::print(stderr, "bench_container: {}\n", made.error().message());
    return 1;
  }
  std::shared_ptr<psych::sandbox> sandbox = std::move(made).value();
  const auto offer = sandbox->offer();
  const auto terms = std::get<psych::execution_terms>(psych::intersect_terms(
      offer, {.limits = offer.limit_ceiling}, {.isolation = psych::isolation_level::isolated}, {}));

  std::vector<contender> all;
  all.push_back({fmt::format("{} run --rm --network=none IMAGE python3 -I -S -c pass", runtime.runtime),
                 "container_bare_run_ms",
                 [&] {
                   return psych::bench::spawn_and_wait({runtime.path, "run", "--rm", "--pull=never", "--network=none",
                                          options.image, options.container_python_bin, "-I", "-S", "-c", "pass"});
                 },
                 {}});
  all.push_back({"psych container run() of `return 1`", "container_psych_run_ms",
                 [&] {
                   const auto result = sandbox->run({.program = "return 1", .terms = terms});
                   if (result.ok() && result.value && result.value->text == "1") return true;
                   fmt::print(stderr, "bench_container: the run failed: {}\n",
                              result.failure ? result.failure->message : "no value");
                   return false;
                 },
                 {}});
  // The command line, as a user runs it: a program file, the default image, isolation asked for.
  char program[] = "/tmp/psych-bench-container-XXXXXX.py";
  const int program_fd = ::mkstemps(program, 3);
  if (program_fd < 0 || ::write(program_fd, "return 1\n", 9) != 9) return 1;
  ::close(program_fd);
  all.push_back({"psych run --backend container --isolation isolated (CLI)", "container_cli_run_ms",
                 [&] {
                   return psych::bench::spawn_and_wait({PSYCH_CLI_PATH, "run", "--backend", "container", "--image", options.image,
                                          "--isolation", "isolated", program});
                 },
                 {}});
  all.push_back({"python3 -I -S -c pass (host)", "container_host_python_ms",
                 [&] { return psych::bench::spawn_and_wait({"/usr/bin/python3", "-I", "-S", "-c", "pass"}); }, {}});

  for (int i = 0; i < rounds + 1; ++i) {
    for (auto& one : all) {
      const auto start = clock_type::now();
      if (!one.once()) return 1;
      const double took = std::chrono::duration<double>(clock_type::now() - start).count();
      if (i >= 1) one.seconds.push_back(took);  // the first round warms the image's pages
    }
  }
  fmt::print("container backend, {} interleaved rounds, {} {}, image {}\n", rounds, runtime.runtime, runtime.version,
             options.image);
  const double bare = psych::bench::median(all.front().seconds);
  for (const auto& one : all) {
    const double m = psych::bench::median(one.seconds);
    fmt::print("  {:<62} {:8.1f} ms  {:5.2f}x\n", one.label, m * 1e3, m / bare);
    fmt::print("BENCH {} {:.1f} ms\n", one.bench_name, m * 1e3);
  }
  fmt::print("BENCH container_psych_over_bare_ratio {:.3f} x\n", psych::bench::median(all[1].seconds) / bare);
  fmt::print("BENCH container_cli_over_bare_ratio {:.3f} x\n", psych::bench::median(all[2].seconds) / bare);
  ::unlink(program);
  return 0;
}
