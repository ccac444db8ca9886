// Cold execution: an end-to-end run() of `return 1` beside the bare
// interpreter, interleaved in one run so that machine noise hits all
// three alike. Prints medians, the ratios, and one machine-readable line per
// figure ("BENCH name value unit").
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "psych/host/sandbox.hpp"

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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 40;
  auto sandbox = psych::local_sandbox({});
  if (!sandbox) {
    fmt::print(stderr, "cold_start: {}\n", sandbox.error().message());
    return 2;
  }
  const auto description = sandbox.value()->describe();
  const auto& python = description.interpreter;
  const auto offer = sandbox.value()->offer();
  const auto terms = std::get<psych::execution_terms>(
      psych::intersect_terms(offer, {.limits = offer.limit_ceiling}, {}, {}));

  std::vector<double> bare_isolated, bare_default, sandboxed;
  for (int i = 0; i < rounds + 3; ++i) {
    const double a = seconds_of([&] { spawn_and_wait({python, "-I", "-S", "-c", "pass"}); });
    const double b = seconds_of([&] { spawn_and_wait({python, "-c", "pass"}); });
    psych::sandbox_result result;
    const double c = seconds_of([&] { result = sandbox.value()->run({.program = "return 1", .terms = terms}); });
    if (!result.ok() || !result.value || result.value->text != "1") {
      fmt::print(stderr, "cold_start: the sandboxed run failed: {}\n",
                 result.failure ? result.failure->message : "no value");
      return 1;
    }
    if (i < 3) continue;  // warm the page cache first
    bare_isolated.push_back(a);
    bare_default.push_back(b);
    sandboxed.push_back(c);
  }
  const double m_isolated = median(bare_isolated), m_default = median(bare_default), m_run = median(sandboxed);
  fmt::print("cold execution of `return 1`, {} interleaved rounds, interpreter {}\n", rounds, python);
  fmt::print("  {:<40} {:8.2f} ms\n", "python3 -I -S -c pass", m_isolated * 1e3);
  fmt::print("  {:<40} {:8.2f} ms\n", "python3 -c pass", m_default * 1e3);
  fmt::print("  {:<40} {:8.2f} ms\n", "psych run (PROCESS, linux-process)", m_run * 1e3);
  fmt::print("  ratio to python3 -I -S -c pass: {:.2f}x (target <= 1.50x)\n", m_run / m_isolated);
  fmt::print("  ratio to python3 -c pass:       {:.2f}x\n", m_run / m_default);
  fmt::print("BENCH cold_bare_isolated_ms {:.3f} ms\n", m_isolated * 1e3);
  fmt::print("BENCH cold_bare_default_ms {:.3f} ms\n", m_default * 1e3);
  fmt::print("BENCH cold_process_run_ms {:.3f} ms\n", m_run * 1e3);
  fmt::print("BENCH cold_process_ratio_to_bare_isolated {:.3f} x\n", m_run / m_isolated);
  fmt::print("BENCH cold_process_ratio_to_bare_default {:.3f} x\n", m_run / m_default);
  return 0;
}
