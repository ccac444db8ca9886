// Cold execution: an end-to-end run() of `return 1` at each local isolation level beside the bare
// interpreter (and, for reference, the interpreter under `unshare -Urnmpf`), interleaved in one
// run so that machine noise hits them all alike. Prints medians, the ratios, and one
// machine-readable line per figure ("BENCH name value unit").
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "psych/host/sandbox.hpp"

#include "median.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_of(const std::function<void()>& body) {
  const auto start = clock_type::now();
  body();
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

void spawn_and_wait(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  char* env[] = {nullptr};
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), env) != 0) std::abort();
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) std::abort();
}

using psych::bench::median;

/// One thing measured per round.
struct contender {
  std::string label;
  std::string bench_name;
  std::function<bool()> once;  ///< false: it failed, and the benchmark stops
  std::vector<double> seconds;
};

/// A pinned local backend running `return 1`, or nullopt (with the reason printed) where it is
/// not available on this host.
std::optional<contender> sandboxed(const char* backend, psych::isolation_level level, const char* bench_name) {
  psych::local_sandbox_options options;
  options.backend = backend;
  options.isolation = level;
  auto made = psych::local_sandbox(options);
  if (!made) {
    fmt::print("  ({} not measured: {})\n", backend, made.error().message());
    return std::nullopt;
  }
  std::shared_ptr<psych::sandbox> sandbox = std::move(made).value();
  const auto offer = sandbox->offer();
  const auto terms = std::get<psych::execution_terms>(
      psych::intersect_terms(offer, {.limits = offer.limit_ceiling}, {.isolation = level}, {}));
  return contender{fmt::format("psych run ({}, {})", psych::name_of(level), backend), bench_name, [=] {
                     const auto result = sandbox->run({.program = "return 1", .terms = terms});
                     if (result.ok() && result.value && result.value->text == "1") return true;
                     fmt::print(stderr, "cold_start: the {} run failed: {}\n", backend,
                                result.failure ? result.failure->message : "no value");
                     return false;
                   }, {}};
}

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
                 [&] { return spawn_and_wait({python, "-I", "-S", "-c", "pass"}), true; }, {}});
  all.push_back({"python3 -c pass", "cold_bare_default_ms", [&] { return spawn_and_wait({python, "-c", "pass"}), true; }, {}});
  if (::access("/usr/bin/unshare", X_OK) == 0)
    all.push_back({"unshare -Urnmpf python3 -I -S -c pass", "cold_unshare_ms",
                   [&] {
                     return spawn_and_wait({"/usr/bin/unshare", "-Urnmpf", python, "-I", "-S", "-c", "pass"}), true;
                   },
                   {}});
  if (auto process = sandboxed("linux-process", psych::isolation_level::process, "cold_process_run_ms"))
    all.push_back(std::move(*process));
  if (auto isolated = sandboxed("linux-namespaces", psych::isolation_level::isolated, "cold_isolated_run_ms"))
    all.push_back(std::move(*isolated));

  for (int i = 0; i < rounds + 3; ++i) {
    for (auto& one : all) {
      bool ok = true;
      const double took = seconds_of([&] { ok = one.once(); });
      if (!ok) return 1;
      if (i >= 3) one.seconds.push_back(took);  // the first rounds warm the page cache
    }
  }

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
