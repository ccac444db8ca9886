// Binding calls: a program makes N sequential calls to a no-op host tool; calls per second and the
// per-call round trip, beside a bare round trip of the same bytes over a Unix socketpair, in one
// run ("BENCH name value unit"). The target: at least 20,000 calls/s (50 us per call).
// Then 1,000 calls gathered under asyncio, and both again journalled in the Run's file log: with
// group commit, and fsynced per record (the log before it) as the baseline, in the same run.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

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

  // Journalled in the Run's file log (in the temp directory), sequential and gathered: with group
  // commit, and fsynced per record as before it (file_run_log_sync::every_record), in turns, three
  // times each; the median of each.
  const int logged_n = std::min(n, 2000);
  char dir_template[] = "/tmp/psych-bench-log-XXXXXX";
  if (!::mkdtemp(dir_template)) std::abort();
  int log_number = 0;
  const auto logged_rate = [&](const std::string& program, int calls, psych::file_run_log_sync sync) {
    const std::string log_path = fmt::format("{}/run-{}.log", dir_template, log_number++);
    auto log = psych::open_file_run_log(log_path, sync);
    if (!log) {
      fmt::print(stderr, "bench_bindings: {}\n", log.error().message());
      std::exit(1);
    }
    return calls / timed(program, {.log = log.value().get(), .execution_id = "bench"}).first;
  };
  const auto logged_sequential = fmt::format(
      "import time\nstart = time.perf_counter()\nfor _ in range({}):\n    await call_tool('noop', {{}})\n"
      "return time.perf_counter() - start",
      logged_n);
  struct rates {
    double group, every_record;
  };
  const auto compared = [&](const std::string& program, int calls) {
    std::vector<double> group, every_record;
    for (int i = 0; i < 3; ++i) {
      every_record.push_back(logged_rate(program, calls, psych::file_run_log_sync::every_record));
      group.push_back(logged_rate(program, calls, psych::file_run_log_sync::group));
    }
    const auto median = [](std::vector<double>& v) {
      std::ranges::sort(v);
      return v[v.size() / 2];
    };
    return rates{median(group), median(every_record)};
  };
  const auto sequential_logged = compared(logged_sequential, logged_n);
  const auto gathered_logged = compared(gathered, gathered_n);
  // What one sync costs on this file system, the lever of format 3 (docs/run-log.md): after a
  // 200-byte append that grows the file, and after the same write into zeros written before.
  const auto sync_ms = [&](bool into_zeros) {
    constexpr int syncs = 300;
    constexpr std::size_t record = 200;
    const std::string path = fmt::format("{}/sync-{}.bin", dir_template, into_zeros);
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) std::abort();
    if (into_zeros) {
      const std::string zeros(syncs * record, '\0');
      if (::pwrite(fd, zeros.data(), zeros.size(), 0) != static_cast<ssize_t>(zeros.size())) std::abort();
    }
    ::fsync(fd);
    const std::string bytes(record, 'x');
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < syncs; ++i) {
      if (::pwrite(fd, bytes.data(), record, static_cast<off_t>(i * record)) != static_cast<ssize_t>(record) ||
          ::fdatasync(fd) != 0)
        std::abort();
    }
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
    ::close(fd);
    return took.count() / syncs;
  };
  const double append_sync_ms = sync_ms(false), overwrite_sync_ms = sync_ms(true);
  // The log alone, without a program: what one journalled call costs the log (its started
  // record made durable, its finished record written), so the figures above can be split into
  // the log's share and the call's own.
  const auto log_alone_us = [&](psych::file_run_log_sync sync) {
    auto log = psych::open_file_run_log(fmt::format("{}/alone-{}.log", dir_template, log_number++), sync);
    if (!log) std::abort();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < logged_n; ++i) {
      const auto id = fmt::format("bench-{}", i);
      if (!log.value()->append_deferred(psych::call_started{id, "bench", "noop", 2}) || !log.value()->sync() ||
          !log.value()->append_deferred(psych::call_finished{id, psych::call_outcome::ok(), 4, 4, 0, "null"}))
        std::abort();
    }
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    return took.count() / logged_n;
  };
  const double alone_every_record_us = log_alone_us(psych::file_run_log_sync::every_record);
  const double alone_group_us = log_alone_us(psych::file_run_log_sync::group);
  std::filesystem::remove_all(dir_template);
  fmt::print("one fdatasync here: {:.3f} ms after an append that grows the file, {:.3f} ms after a write into zeros\n",
             append_sync_ms, overwrite_sync_ms);
  fmt::print("BENCH fdatasync_after_append_ms {:.3f} ms\n", append_sync_ms);
  fmt::print("BENCH fdatasync_into_zeros_ms {:.3f} ms\n", overwrite_sync_ms);
  fmt::print("the log alone, {} calls' records: {:.1f} us a call with group commit, {:.1f} us fsync per record ({:.2f}x)\n",
             logged_n, alone_group_us, alone_every_record_us, alone_every_record_us / alone_group_us);
  fmt::print("BENCH log_alone_speedup {:.2f} x\n", alone_every_record_us / alone_group_us);

  fmt::print("{} sequential calls journalled in a file run log, target >= 2x fsync per record:\n", logged_n);
  fmt::print("  group commit, format 3 (one sync into zeros a call): {:.0f} calls/s, {:.1f} us per call\n",
             sequential_logged.group, 1e6 / sequential_logged.group);
  fmt::print("  fsync per record, format 2 (the log before):         {:.0f} calls/s, {:.1f} us per call ({:.2f}x)\n",
             sequential_logged.every_record, 1e6 / sequential_logged.every_record,
             sequential_logged.group / sequential_logged.every_record);
  fmt::print("{} calls gathered under asyncio, journalled, target >= 10x fsync per record sequential:\n", gathered_n);
  fmt::print("  group commit: {:.0f} calls/s ({:.1f}x the fsync-per-record sequential rate)\n", gathered_logged.group,
             gathered_logged.group / sequential_logged.every_record);
  fmt::print("  fsync per record: {:.0f} calls/s ({:.2f}x with group commit)\n", gathered_logged.every_record,
             gathered_logged.group / gathered_logged.every_record);
  fmt::print("BENCH logged_calls_per_second {:.0f} 1/s\n", sequential_logged.group);
  fmt::print("BENCH logged_calls_per_second_fsync_per_record {:.0f} 1/s\n", sequential_logged.every_record);
  fmt::print("BENCH logged_sequential_speedup {:.2f} x\n", sequential_logged.group / sequential_logged.every_record);
  fmt::print("BENCH logged_gathered_calls_per_second {:.0f} 1/s\n", gathered_logged.group);
  fmt::print("BENCH logged_gathered_calls_per_second_fsync_per_record {:.0f} 1/s\n", gathered_logged.every_record);
  fmt::print("BENCH logged_gathered_speedup {:.2f} x\n", gathered_logged.group / sequential_logged.every_record);
  return 0;
}
