// What each namespace of an ISOLATED execution costs to make and tear down: clone() and wait for
// a child that exits at once, as a plain fork, with the six namespaces other than net, and with
// net as well; then the same with N clones at once, where net namespaces contend for a global
// kernel lock. Medians, in one interleaved run ("BENCH name value unit").
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "median.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

/// One clone() with `flags` and the wait for its child; -1 when the kernel refused.
double clone_and_reap(unsigned long flags) {
  const auto start = clock_type::now();
  const long pid = ::syscall(SYS_clone, flags | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
  if (pid == 0) ::_exit(0);
  if (pid < 0) return -1;
  int status = 0;
  ::waitpid(static_cast<pid_t>(pid), &status, 0);
  return std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
}

using psych::bench::median;

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 100;
  const int parallel = argc > 2 ? std::atoi(argv[2]) : 32;
  constexpr unsigned long six = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
  const std::pair<const char*, unsigned long> kinds[] = {
      {"fork", 0}, {"six_namespaces", six}, {"seven_with_net", six | CLONE_NEWNET}};
  std::vector<double> seen[3];
  for (int i = 0; i < rounds; ++i)
    for (int k = 0; k < 3; ++k) {
      const double ms = clone_and_reap(kinds[k].second);
      if (ms < 0) {
        fmt::print("bench_namespaces: clone({}) refused: this host does not allow these namespaces\n", kinds[k].first);
        return 1;
      }
      seen[k].push_back(ms);
    }
  fmt::print("clone + exit + reap, median of {} interleaved rounds:\n", rounds);
  for (int k = 0; k < 3; ++k) {
    fmt::print("  {:<16} {:7.3f} ms\n", kinds[k].first, median(seen[k]));
    fmt::print("BENCH clone_{}_ms {:.3f} ms\n", kinds[k].first, median(seen[k]));
  }
  fmt::print("  the net namespace alone: {:.3f} ms\n", median(seen[2]) - median(seen[1]));

  // N at once: the whole batch's wall time, with and without net.
  for (const auto& [name, flags] : {std::pair{"six_namespaces", six}, std::pair{"seven_with_net", six | CLONE_NEWNET}}) {
    std::vector<double> batches;
    for (int b = 0; b < 5; ++b) {
      const auto start = clock_type::now();
      std::vector<std::thread> threads;
      for (int i = 0; i < parallel; ++i) threads.emplace_back([flags = flags] { clone_and_reap(flags); });
      for (auto& thread : threads) thread.join();
      batches.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - start).count());
    }
    fmt::print("  {} at once, {:<16} {:7.3f} ms per batch\n", parallel, name, median(batches));
    fmt::print("BENCH clone_{}_x{}_ms {:.3f} ms\n", name, parallel, median(batches));
  }
  return 0;
}
