// Binding calls: a program makes N sequential calls to a no-op host tool; calls per second and the
// per-call round trip, beside a bare round trip of the same bytes over a Unix socketpair, in one
// run ("BENCH name value unit"). The target: at least 20,000 calls/s (50 us per call).
// Then 1,000 calls gathered under asyncio, and the sequential calls again with the Run's log
// (a file, fsynced per record) in the temp directory.
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "psych/host/run_log.hpp"
#include "psych/host/sandbox.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

/// Answers at once, on the host's own thread: what is measured is the path, not a tool.
class no_op_invoker final : public psych::tool_invoker {
 public:
  psych::call_permission permit(const psych::tool_call&) override { return psych::call_permission::allow(); }
  void invoke(const psych::tool_call&, std::stop_token, std::function<void(psych::tool_outcome)> done) override {
    done(psych::tool_outcome::value("0"));
  }
};

double host_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

/// N round trips of a call-sized line and a result-sized line over a socketpair, echoed by a thread.
double bare_round_trip_us(int n) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) std::abort();
  const std::string call = R"({"type":"call","id":1234,"tool":"noop","arguments":{}})" "\n";
  const std::string answer = R"({"type":"result","id":1234,"ok":true,"value":0})" "\n";
  std::thread echo([&] {
    char buffer[256];
    for (int i = 0; i < n; ++i) {
      std::size_t got = 0;
      while (got < call.size()) got += static_cast<std::size_t>(::read(pair[1], buffer, sizeof buffer));
      if (::write(pair[1], answer.data(), answer.size()) < 0) std::abort();
    }
  });
  char buffer[256];
  const auto start = clock_type::now();
  for (int i = 0; i < n; ++i) {
    if (::write(pair[0], call.data(), call.size()) < 0) std::abort();
    std::size_t got = 0;
    while (got < answer.size()) got += static_cast<std::size_t>(::read(pair[0], buffer, sizeof buffer));
  }
  const double us = std::chrono::duration<double, std::micro>(clock_type::now() - start).count() / n;
  echo.join();
  ::close(pair[0]);
  ::close(pair[1]);
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 10000;
  psych::local_sandbox_options options;  // the strongest backend, unless argv[2] pins one
  if (argc > 2) options.backend = argv[2];
  auto made = psych::local_sandbox(options);
  if (!made) {
    fmt::print(stderr, "bench_bindings: {}\n", made.error().message());
    return 2;
  }
  auto& sandbox = *made.value();
  const auto offer = sandbox.offer();
  auto terms = std::get<psych::execution_terms>(psych::intersect_terms(offer, {.limits = offer.limit_ceiling}, {}, {}));
  no_op_invoker invoker;
  const auto timed = [&](const std::string& program, psych::run_account run = {}) {
    const auto result = sandbox.run(
        {.program = program, .terms = terms, .bindings = {{"noop", ""}}, .invoker = &invoker,
         .budget = {.max_calls = 1u << 30, .max_run_calls = 1u << 30}, .run = run});
    if (!result.ok() || !result.value) {
      fmt::print(stderr, "bench_bindings: {}\n", result.failure ? result.failure->message : "no value");
      std::exit(1);
    }
    const auto& text = result.value->text;
    return std::pair{std::stod(text.substr(text.front() == '[' || text.front() == '"' ? 1 : 0)), result};
  };
  // The program reports its wall time and, as a second value, the CPU time it spent, so the
  // per-call cost splits into the program's CPU, the host's CPU, and waiting (wake-ups).
  const auto sequential = fmt::format(
      "import time\nstart, cpu = time.perf_counter(), time.process_time()\nfor _ in range({}):\n"
      "    await call_tool('noop', {{}})\nreturn [time.perf_counter() - start, time.process_time() - cpu]",
      n);
  const auto host_cpu_before = host_cpu_seconds();
  const auto [seconds, result] = timed(sequential);
  const double host_cpu_us = (host_cpu_seconds() - host_cpu_before) * 1e6 / n;
  const double per_call_us = seconds * 1e6 / n;
  const double program_cpu_us = std::stod(result.value->text.substr(result.value->text.find(',') + 1)) * 1e6 / n;
  const double bare_us = bare_round_trip_us(n);
  fmt::print("{} sequential calls of a no-op tool from one program ({}), target >= 20000 calls/s (<= 50 us):\n", n,
             psych::name_of(*result.isolation));
  fmt::print("  under asyncio (the program imports time to time itself): {:.0f} calls/s, {:.1f} us per call\n",
             n / seconds, per_call_us);
  fmt::print("  bare round trip of the same bytes over a socketpair: {:.1f} us ({:.1f}x)\n", bare_us, per_call_us / bare_us);
  fmt::print("  CPU per call: {:.1f} us in the program, {:.1f} us on the host (the whole execution, spread)\n",
             program_cpu_us, host_cpu_us);
  fmt::print("BENCH binding_program_cpu_us {:.2f} us\n", program_cpu_us);
  fmt::print("BENCH binding_host_cpu_us {:.2f} us\n", host_cpu_us);
  fmt::print("BENCH asyncio_binding_calls_per_second {:.0f} 1/s\n", n / seconds);
  fmt::print("BENCH asyncio_binding_call_us {:.2f} us\n", per_call_us);

  // A program that imports nothing runs without asyncio (the hand-driven driver). It cannot read a
  // clock, so its per-call cost is the difference of two executions' durations, N calls and none.
  const auto plain_duration = [&](int calls) {
    const auto program = fmt::format("for _ in range({}):\n    await call_tool('noop', {{}})\nreturn '0'", calls);
    double best = 1e9;  // the best of three: a cold start's noise dwarfs the difference otherwise
    for (int i = 0; i < 3; ++i) best = std::min(best, timed(program).second.duration_seconds);
    return best;
  };
  const double plain_us = (plain_duration(n) - plain_duration(0)) * 1e6 / n;
  fmt::print("  without asyncio (a program that imports nothing): {:.0f} calls/s, {:.1f} us per call ({:.1f}x bare)\n",
             1e6 / plain_us, plain_us, plain_us / bare_us);
  fmt::print("BENCH binding_calls_per_second {:.0f} 1/s\n", 1e6 / plain_us);
  fmt::print("BENCH binding_call_us {:.2f} us\n", plain_us);
  fmt::print("BENCH bare_socket_round_trip_us {:.2f} us\n", bare_us);

  constexpr int gathered_n = 1000;
  const auto gathered = fmt::format(
      "import asyncio, time\nstart = time.perf_counter()\n"
      "await asyncio.gather(*(call_tool('noop', {{}}) for _ in range({})))\nreturn time.perf_counter() - start",
      gathered_n);
  const auto [gathered_seconds, unused] = timed(gathered);
  fmt::print("{} calls gathered under asyncio: {:.1f} ms in all, {:.0f} calls/s, {:.1f} us per call\n", gathered_n,
             gathered_seconds * 1e3, gathered_n / gathered_seconds, gathered_seconds * 1e6 / gathered_n);
  fmt::print("BENCH gathered_calls_per_second {:.0f} 1/s\n", gathered_n / gathered_seconds);

  const int logged_n = std::min(n, 2000);
  char dir_template[] = "/tmp/psych-bench-log-XXXXXX";
  if (!::mkdtemp(dir_template)) std::abort();
  const std::string log_path = std::string(dir_template) + "/run.log";
  {
    auto log = psych::open_file_run_log(log_path);
    if (!log) {
      fmt::print(stderr, "bench_bindings: {}\n", log.error().message());
      return 1;
    }
    const auto logged = fmt::format(
        "import time\nstart = time.perf_counter()\nfor _ in range({}):\n    await call_tool('noop', {{}})\n"
        "return time.perf_counter() - start",
        logged_n);
    const auto [logged_seconds, unused2] = timed(logged, {.log = log.value().get(), .execution_id = "bench"});
    fmt::print("{} sequential calls journalled in a file run log (two fsynced records per call): {:.0f} calls/s, "
               "{:.1f} us per call\n",
               logged_n, logged_n / logged_seconds, logged_seconds * 1e6 / logged_n);
    fmt::print("BENCH logged_calls_per_second {:.0f} 1/s\n", logged_n / logged_seconds);
  }
  std::filesystem::remove_all(dir_template);
  return 0;
}
