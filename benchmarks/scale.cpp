// Throughput of psych serve behind HAProxy (docs/deploy.md, "Throughput"): executions per second
// through the shipped HAProxy configuration with 1, 2 and 3 `psych serve` replicas on this host
// (tests/scale's cluster), beside the same executions run by a local_sandbox in this process, in
// rounds that take each contender in turn. Every execution is tests/scale's short program: one
// binding call, then its value. 24 in flight throughout (twice three replicas' slots), and the
// local run also at 4 in flight (one replica's slots). Prints executions/s per contender (the
// median of its rounds), the ratios to one replica, and "BENCH name value unit" lines; and, since
// on 2 cores the figure is the host's and not the cluster's, the CPU time one execution costs each
// part (the replicas with the sandboxes they reaped, HAProxy, this client), from which a cluster's
// figure follows: docs/deploy.md, "Throughput".
//   bench_scale [EXECUTIONS_PER_ROUND] [ROUNDS]
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "load.hpp"
#include "median.hpp"
#include "psych/host/sandbox.hpp"

namespace {

using namespace scale_test;

struct contender {
  std::string label, bench_name;
  /// Runs `executions` through it `in_flight` at a time; the executions per second, or 0 (with
  /// why printed) when it could not.
  std::function<double(std::size_t executions)> round;
  std::vector<double> per_second;
};

/// Executions per second of one load through `sandbox`; 0 if any execution failed.
double measured(psych::sandbox& sandbox, const std::string& label, std::size_t executions, int in_flight) {
  marker side_effects(executions);
  const auto begun = clock::now();
  const auto done = run_load(sandbox, side_effects,
                             {.prefix = "bench-" + random_suffix(), .limit = executions, .in_flight = in_flight,
                              .program = marking_program});
  const double seconds = std::chrono::duration<double>(clock::now() - begun).count();
  for (std::size_t n = 0; n < done.size(); ++n)
    if (!done[n].ok || side_effects.calls[n] != 1) {
      fmt::print(stderr, "bench_scale: {}: execution {} failed: {}\n", label, n, done[n].message);
      return 0;
    }
  return static_cast<double>(done.size()) / seconds;
}

/// CPU seconds of process `pid` and of the children it has reaped (utime, stime, cutime, cstime of
/// /proc/<pid>/stat): for a replica, itself and its executions' launchers and programs.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto after_name = stat.rfind(')');
  if (after_name == std::string::npos) return 0;
  std::istringstream fields(stat.substr(after_name + 2));  // from field 3, the state
  std::string field;
  double ticks = 0;
  for (int number = 3; number <= 17 && fields >> field; ++number)
    if (number >= 14) ticks += std::stod(field);
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

/// CPU seconds of this process (`who` RUSAGE_SELF), or of the children it has reaped
/// (RUSAGE_CHILDREN: a local_sandbox's launchers, and the programs they reaped).
double own_cpu_seconds(int who = RUSAGE_SELF) {
  rusage usage{};
  ::getrusage(who, &usage);
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

/// One local round, with the CPU milliseconds per execution of this process and its sandboxes.
double local_round(psych::sandbox& local, int in_flight, std::size_t executions, std::vector<double>& cpu_ms) {
  const double before = own_cpu_seconds() + own_cpu_seconds(RUSAGE_CHILDREN);
  const double per_second = measured(local, fmt::format("local, {} in flight", in_flight), executions, in_flight);
  cpu_ms.push_back(1000 * (own_cpu_seconds() + own_cpu_seconds(RUSAGE_CHILDREN) - before) /
                   static_cast<double>(executions));
  return per_second;
}

/// CPU milliseconds per execution of the last round through HAProxy with N replicas, by part.
struct cpu_cost {
  std::vector<double> replicas_ms, haproxy_ms, client_ms;
};
cpu_cost costs[4];

/// A cluster of `replicas` stood up for one round, loaded, and taken down.
double through_haproxy(int replicas, std::size_t executions) {
  std::string why;
  auto c = cluster::start(&why, {.replicas = replicas});
  if (!c) {
    fmt::print(stderr, "bench_scale: {} replicas could not be stood up: {}\n", replicas, why);
    return 0;
  }
  auto client = psych::remote_sandbox(client_options(*c));
  const auto described = client ? client.value()->describe() : psych::description{};
  if (!described.ready) {
    fmt::print(stderr, "bench_scale: no ready client for {} replicas\n", replicas);
    return 0;
  }
  if (replicas == 1) fmt::print("the replicas' interpreter: {}\n", described.interpreter);
  const auto replicas_cpu = [&] {
    double sum = 0;
    for (int i = 0; i < c->replica_count(); ++i) sum += cpu_seconds(c->at(i).process().pid());
    return sum;
  };
  const double replicas_before = replicas_cpu(), haproxy_before = cpu_seconds(c->haproxy().pid()),
               client_before = own_cpu_seconds();
  const double per_second = measured(*client.value(), fmt::format("{} replicas", replicas), executions, 24);
  const auto per_execution_ms = [&](double seconds) { return 1000 * seconds / static_cast<double>(executions); };
  auto& cost = costs[replicas];
  cost.replicas_ms.push_back(per_execution_ms(replicas_cpu() - replicas_before));
  cost.haproxy_ms.push_back(per_execution_ms(cpu_seconds(c->haproxy().pid()) - haproxy_before));
  cost.client_ms.push_back(per_execution_ms(own_cpu_seconds() - client_before));
  return per_second;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t executions = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 240;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 2;
  if (::access("/usr/sbin/haproxy", X_OK) != 0) {
    fmt::print(stderr, "bench_scale: not measured: haproxy is not installed (scripts/test installs it)\n");
    return 77;  // a skip, for scale.bench_smoke
  }
  psych::local_sandbox_options options;
  options.backend = "linux-process";
  options.isolation = psych::isolation_level::process;
  auto local = psych::local_sandbox(options);
  if (!local) {
    fmt::print(stderr, "bench_scale: no local linux-process sandbox: {}\n", local.error().message());
    return 1;
  }
  // The same interpreter on both sides, or the comparison says nothing: the replicas run with a
  // PATH of the system's directories, this process with the caller's (whose pyenv shim the library
  // skips: local_sandbox_options::interpreter).
  fmt::print("the local interpreter: {}\n", local.value()->describe().interpreter);
  std::vector<double> local_cpu_ms;
  std::vector<contender> all{
      {"local_sandbox, 4 in flight", "scale_local_4_per_s",
       [&](std::size_t n) { return local_round(*local.value(), 4, n, local_cpu_ms); }, {}},
      {"local_sandbox, 24 in flight", "scale_local_24_per_s",
       [&](std::size_t n) { return local_round(*local.value(), 24, n, local_cpu_ms); }, {}},
      {"HAProxy + 1 replica", "scale_haproxy_1_per_s", [](std::size_t n) { return through_haproxy(1, n); }, {}},
      {"HAProxy + 2 replicas", "scale_haproxy_2_per_s", [](std::size_t n) { return through_haproxy(2, n); }, {}},
      {"HAProxy + 3 replicas", "scale_haproxy_3_per_s", [](std::size_t n) { return through_haproxy(3, n); }, {}}};
  for (int round = 0; round < rounds; ++round)
    for (auto& c : all) {
      const double per_second = c.round(executions);
      if (per_second <= 0) return 1;
      c.per_second.push_back(per_second);
      fmt::print("round {}: {:28} {:6.1f} executions/s\n", round + 1, c.label, per_second);
    }
  fmt::print("\n{} executions per round, {} rounds, the median of each (this host: {} cores):\n", executions, rounds,
             std::thread::hardware_concurrency());
  for (const auto& c : all) {
    const double value = psych::bench::median(c.per_second);
    fmt::print("  {:28} {:6.1f} executions/s\n", c.label, value);
    fmt::print("BENCH {} {:.2f} executions/s\n", c.bench_name, value);
  }
  const double one = psych::bench::median(all[2].per_second);
  fmt::print("BENCH scale_haproxy_2_over_1 {:.3f} x\n", psych::bench::median(all[3].per_second) / one);
  fmt::print("BENCH scale_haproxy_3_over_1 {:.3f} x\n", psych::bench::median(all[4].per_second) / one);
  fmt::print("BENCH scale_haproxy_3_over_local_24 {:.3f} x\n",
             psych::bench::median(all[4].per_second) / psych::bench::median(all[1].per_second));
  const double local_ms = psych::bench::median(local_cpu_ms);
  fmt::print("\nCPU time per execution, local_sandbox (this process and its sandboxes, every local round): {:.1f} ms\n",
             local_ms);
  fmt::print("BENCH scale_cpu_local_ms {:.2f} ms\n", local_ms);
  fmt::print("CPU time per execution through HAProxy (the median of the rounds):\n");
  for (int replicas = 1; replicas <= 3; ++replicas) {
    const auto& cost = costs[replicas];
    const double replica_ms = psych::bench::median(cost.replicas_ms), haproxy_ms = psych::bench::median(cost.haproxy_ms),
                 client_ms = psych::bench::median(cost.client_ms);
    fmt::print("  {} replica{}: replicas and their sandboxes {:.1f} ms, HAProxy {:.2f} ms, client {:.1f} ms\n", replicas,
               replicas > 1 ? "s" : "", replica_ms, haproxy_ms, client_ms);
    fmt::print("BENCH scale_cpu_replica_ms_{} {:.2f} ms\n", replicas, replica_ms);
    fmt::print("BENCH scale_cpu_haproxy_ms_{} {:.3f} ms\n", replicas, haproxy_ms);
    fmt::print("BENCH scale_cpu_client_ms_{} {:.2f} ms\n", replicas, client_ms);
  }
  return 0;
}
