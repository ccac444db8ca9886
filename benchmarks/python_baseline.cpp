// The C++ side of benchmarks/python_face.py: the library's own run() and a C++ function tool, driven
// one step at a time over stdin so that the Python script can put each beside its own measurement in
// the same round (interleaved, as interleaved.hpp does within one process).
//   bench_python_baseline BACKEND ISOLATION     (e.g. linux-process process)
// Reads lines: "run" -> one run() of `return 1`, prints its seconds; "calls N" -> one program making
// N sequential calls to a C++ function tool, journalled in a run log held in memory, prints the calls
// per second of the execution; "calls N PATH" -> the same journalled in the file run log at PATH (the
// embedded default a runtime uses, one durable record per call), removed afterwards. "quit" or the
// end of input ends it. A failure prints "error ..." and exits 1.
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <cstdlib>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "pinned.hpp"
#include "psych/host/function_tools.hpp"
#include "psych/host/run_log.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

/// N calls to `echo`, a C++ function tool as a runtime registers one, from one program.
double function_tool_calls_per_second(psych::sandbox& sandbox, psych::isolation_level level, int n,
                                      const std::string& log_path) {
  auto tools = psych::function_tools::create(
                   {{"echo", "echoes", R"({"type":"object"})",
                     [](const psych::json_text& arguments, std::stop_token) -> psych::tool_answer<psych::json_text> {
                       return arguments;
                     }}})
                   .value();
  const auto offer = sandbox.offer();
  auto terms = std::get<psych::execution_terms>(
      psych::intersect_terms(offer, {.limits = offer.limit_ceiling}, {.isolation = level}, {}));
  psych::binding_budget budget;
  budget.max_calls.value = budget.max_run_calls.value = static_cast<std::uint64_t>(n) + 1;
  budget.max_transfer_bytes.value = budget.max_run_transfer_bytes.value = std::uint64_t{1} << 30;
  budget.max_produced_bytes.value = budget.max_run_produced_bytes.value = std::uint64_t{1} << 30;
  budget.max_preserved_bytes.value = budget.max_run_preserved_bytes.value = std::uint64_t{1} << 30;
  std::unique_ptr<psych::run_log> log;
  if (log_path.empty()) {
    log = psych::open_memory_run_log();
  } else {
    auto opened = psych::open_file_run_log(log_path);
    if (!opened) {
      fmt::print("error {}\n", opened.error().message());
      std::exit(1);
    }
    log = std::move(opened).value();
  }
  psych::run_request request{.program = fmt::format("for i in range({}):\n    await echo(i=i)\nreturn {}", n, n),
                             .terms = terms,
                             .bindings = tools->offered_now(),
                             .invoker = tools.get(),
                             .budget = budget,
                             .run = {.log = log.get()}};
  const auto result = sandbox.run(request);
  if (!result.ok()) {
    fmt::print("error {}\n", result.failure->message);
    std::exit(1);
  }
  return n / result.duration_seconds;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fmt::print(stderr, "usage: bench_python_baseline BACKEND process|isolated\n");
    return 2;
  }
  const auto level = std::string_view(argv[2]) == "isolated" ? psych::isolation_level::isolated
                                                               : psych::isolation_level::process;
  auto sandbox = psych::bench::pinned_sandbox(argv[1], level);
  if (!sandbox) return 1;
  const auto return_one = psych::bench::return_one(sandbox, level);
  std::string line;
  while (std::getline(std::cin, line) && line != "quit") {
    if (line == "run") {
      const auto start = clock_type::now();
      if (!return_one()) {
        fmt::print("error run\n");
        return 1;
      }
      fmt::print("{:.9f}\n", std::chrono::duration<double>(clock_type::now() - start).count());
    } else if (line.starts_with("calls ")) {
      std::istringstream words(line.substr(6));
      int n = 0;
      std::string log_path;
      words >> n >> log_path;
      const double rate = function_tool_calls_per_second(*sandbox, level, n, log_path);
      if (!log_path.empty()) std::filesystem::remove(log_path);
      fmt::print("{:.1f}\n", rate);
    } else {
      fmt::print("error unknown command {}\n", line);
      return 1;
    }
    std::fflush(stdout);
  }
  return 0;
}
