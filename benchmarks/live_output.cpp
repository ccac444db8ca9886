// Live output (docs/live-output.md), in one run:
//   1. latency: a program prints a line stamped with CLOCK_MONOTONIC every 20 ms; the sink notes
//      when each arrives. Locally on linux-process and linux-namespaces, and over TLS loopback to an
//      in-process psych serve on linux-namespaces. Targets: p95 at most 100 ms locally, 150 ms
//      over TLS.
//   2. 1 GiB of output on linux-process, with a sink (that counts) and without, interleaved, each
//      run in a fresh process of this benchmark that reports its own peak RSS. Targets: with the
//      sink, peak RSS at most 32 MiB and at least 0.5x the throughput without it.
// Uses the system's python (/usr/bin/python3). Prints "BENCH name value unit" lines.
//   bench_live_output [LINES] [ROUNDS]
#include <spawn.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "psych/host/remote_sandbox.hpp"
#include "psych/host/sandbox_service.hpp"

#include "median.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

psych::local_sandbox_options local_options(const char* backend) {
  psych::local_sandbox_options local;
  local.backend = backend;
  local.python_bin = "/usr/bin/python3";
  local.isolation = std::string_view(backend) == "linux-namespaces" ? psych::isolation_level::isolated
                                                                    : psych::isolation_level::process;
  if (::geteuid() == 0) local.run_as_uid = local.run_as_gid = 1'500'410;
  else local.allow_same_uid = true;
  return local;
}

psych::execution_terms terms_of(psych::sandbox& sb, psych::isolation_level level, double wall_seconds = 60) {
  const auto offer = sb.offer();
  auto terms = std::get<psych::execution_terms>(
      psych::intersect_terms(offer, {.limits = offer.limit_ceiling}, {.isolation = level}, {}));
  terms.limits.wall_seconds.value = std::min(terms.limits.wall_seconds.value, wall_seconds);
  return terms;
}

/// The delay of each stamped line, from the program's print to the sink.
class latency_sink final : public psych::output_sink {
 public:
  void on_output(const psych::output_chunk& chunk) override {
    const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch()).count();
    if (chunk.stream != psych::output_stream::stdout_stream) return;
    pending_.append(chunk.data);
    for (std::size_t newline; (newline = pending_.find('\n')) != std::string::npos;) {
      const std::string line = pending_.substr(0, newline);
      pending_.erase(0, newline + 1);
      if (line.starts_with("t ")) delays_ms.push_back(static_cast<double>(now - std::stoll(line.substr(2))) / 1e6);
    }
  }
  std::vector<double> delays_ms;

 private:
  std::string pending_;
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

bool measure_latency(const std::string& label, const std::string& bench_name, psych::sandbox& sb,
                     psych::isolation_level level, int lines) {
  // steady_clock is CLOCK_MONOTONIC here, as Python's time.monotonic_ns(): one clock on both sides.
  const std::string program = fmt::format(
      "import time\nfor i in range({}):\n    print('t', time.monotonic_ns())\n    time.sleep(0.02)\n", lines);
  latency_sink sink;
  const auto r = sb.run({.program = program, .terms = terms_of(sb, level), .live_output = &sink});
  if (!r.ok() || sink.delays_ms.size() != static_cast<std::size_t>(lines)) {
    fmt::print(stderr, "bench_live_output: {}: {} ({} of {} lines)\n", label,
               r.failure ? r.failure->message : "ok", sink.delays_ms.size(), lines);
    return false;
  }
  const double p50 = percentile(sink.delays_ms, 0.5), p95 = percentile(sink.delays_ms, 0.95);
  fmt::print("  {:<40} p50 {:6.1f} ms  p95 {:6.1f} ms  max {:6.1f} ms\n", label, p50, p95,
             *std::max_element(sink.delays_ms.begin(), sink.delays_ms.end()));
  fmt::print("BENCH {}_p50 {:.1f} ms\nBENCH {}_p95 {:.1f} ms\n", bench_name, p50, bench_name, p95);
  return true;
}

/// The latency contenders; over TLS to a psych serve this process runs.
int latency_part(int lines) {
  fmt::print("latency, print to sink ({} lines, one every 20 ms):\n", lines);
  for (const auto* backend : {"linux-process", "linux-namespaces"}) {
    auto sb = psych::local_sandbox(local_options(backend));
    if (!sb) {
      fmt::print("  {} not measured: {}\n", backend, sb.error().message());
      continue;
    }
    const auto level = local_options(backend).isolation;
    if (!measure_latency(fmt::format("local, {}", backend), fmt::format("live_latency_{}", backend), *sb.value(),
                         level, lines))
      return 1;
  }
  std::string dir = std::filesystem::temp_directory_path().string() + "/psych-bench-live-XXXXXX";
  if (!::mkdtemp(dir.data())) return 1;
  const auto cleanup = [&] { std::filesystem::remove_all(dir); };
  const std::string openssl = fmt::format(
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout {0}/key.pem -out "
      "{0}/cert.pem -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 -days 1 2>/dev/null",
      dir);
  auto served = psych::local_sandbox(local_options("linux-namespaces"));
  if (std::system(openssl.c_str()) != 0 || !served) {
    fmt::print("  over TLS not measured: {}\n", served ? "openssl could not make a certificate" : served.error().message());
    cleanup();
    return 0;
  }
  std::ofstream(dir + "/tokens") << "bench bench-token\n";
  auto service = psych::sandbox_service::start(std::move(served).value(),
                                               {.port = 0,
                                                .tls_cert_file = dir + "/cert.pem",
                                                .tls_key_file = dir + "/key.pem",
                                                .token_file = dir + "/tokens",
                                                .access_log = [](std::string_view) {}});
  if (!service) {
    fmt::print(stderr, "bench_live_output: {}\n", service.error().message());
    cleanup();
    return 1;
  }
  auto over_tls = psych::remote_sandbox({.url = fmt::format("https://127.0.0.1:{}", service.value()->port()),
                                         .token = []() -> psych::result<std::string> { return std::string("bench-token"); },
                                         .ca_file = dir + "/cert.pem"});
  int status = 0;
  if (!over_tls) {
    fmt::print(stderr, "bench_live_output: {}\n", over_tls.error().message());
    status = 1;
  } else if (!measure_latency("remote over TLS loopback, linux-namespaces", "live_latency_remote_tls",
                              *over_tls.value(), psych::isolation_level::isolated, lines)) {
    status = 1;
  }
  if (over_tls) over_tls.value().reset();  // before the service it talks to
  service.value()->shutdown();
  cleanup();
  return status;
}

// ---- 1 GiB, in a process of its own per run ----

class counting_sink final : public psych::output_sink {
 public:
  void on_output(const psych::output_chunk& chunk) override {
    shown += chunk.data.size();
    skipped += chunk.skipped;
  }
  std::uint64_t shown = 0, skipped = 0;
};

constexpr std::uint64_t gib = std::uint64_t{1} << 30;

/// The child's side: one run of 1 GiB, then "seconds peak_rss_kib shown skipped" on stdout.
int one_gib(bool with_sink) {
  auto sb = psych::local_sandbox(local_options("linux-process"));
  if (!sb) {
    fmt::print(stderr, "{}\n", sb.error().message());
    return 77;
  }
  const char* program = "import sys\nblock = b'x' * (1 << 20)\nw = sys.stdout.buffer.write\nfor _ in range(1024):\n"
                        "    w(block)\n";
  counting_sink sink;
  const auto start = clock_type::now();
  const auto r = sb.value()->run({.program = program,
                                  .terms = terms_of(*sb.value(), psych::isolation_level::process, 120),
                                  .live_output = with_sink ? &sink : nullptr});
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  if (!r.ok() || r.stdout_size != gib) {
    fmt::print(stderr, "{} ({} bytes)\n", r.failure ? r.failure->message : "short", r.stdout_size);
    return 1;
  }
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  fmt::print("{} {} {} {}\n", seconds, usage.ru_maxrss, sink.shown, sink.skipped);
  return 0;
}

struct gib_run {
  double seconds = 0;
  long rss_kib = 0;
  std::uint64_t shown = 0, skipped = 0;
};

bool spawn_one_gib(const char* self, bool with_sink, gib_run& out) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return false;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  std::string mode = with_sink ? "--one-gib-with-sink" : "--one-gib";
  char* argv[] = {const_cast<char*>(self), mode.data(), nullptr};
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, self, &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  std::string text;
  char buffer[256];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  if (spawned != 0) return false;
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return false;
  unsigned long long shown = 0, skipped = 0;
  if (std::sscanf(text.c_str(), "%lf %ld %llu %llu", &out.seconds, &out.rss_kib, &shown, &skipped) != 4) return false;
  out.shown = shown;
  out.skipped = skipped;
  return true;
}

int gib_part(const char* self, int rounds) {
  fmt::print("1 GiB of stdout on linux-process ({} rounds, interleaved, each run its own process):\n", rounds);
  std::vector<double> plain_s, sink_s;
  long plain_rss = 0, sink_rss = 0;
  std::uint64_t skipped = 0;
  for (int round = 0; round < rounds; ++round) {
    gib_run plain, streamed;
    if (!spawn_one_gib(self, false, plain) || !spawn_one_gib(self, true, streamed)) {
      fmt::print(stderr, "bench_live_output: a 1 GiB run failed\n");
      return 1;
    }
    if (streamed.shown + streamed.skipped != gib) {
      fmt::print(stderr, "bench_live_output: the sink accounted for {} bytes, not {}\n",
                 streamed.shown + streamed.skipped, gib);
      return 1;
    }
    plain_s.push_back(plain.seconds);
    sink_s.push_back(streamed.seconds);
    plain_rss = std::max(plain_rss, plain.rss_kib);
    sink_rss = std::max(sink_rss, streamed.rss_kib);
    skipped += streamed.skipped;
  }
  const double plain_mib_s = 1024 / psych::bench::median(plain_s), sink_mib_s = 1024 / psych::bench::median(sink_s);
  fmt::print("  {:<28} {:8.1f} MiB/s  peak RSS {:6.1f} MiB\n", "without a sink", plain_mib_s, static_cast<double>(plain_rss) / 1024.0);
  fmt::print("  {:<28} {:8.1f} MiB/s  peak RSS {:6.1f} MiB  ({} bytes skipped over all rounds)\n",
             "with a counting sink", sink_mib_s, static_cast<double>(sink_rss) / 1024.0, skipped);
  fmt::print("BENCH live_gib_plain_throughput {:.1f} MiB/s\nBENCH live_gib_sink_throughput {:.1f} MiB/s\n", plain_mib_s,
             sink_mib_s);
  fmt::print("BENCH live_gib_throughput_ratio {:.3f} x\n", sink_mib_s / plain_mib_s);
  fmt::print("BENCH live_gib_plain_peak_rss {:.1f} MiB\nBENCH live_gib_sink_peak_rss {:.1f} MiB\n", static_cast<double>(plain_rss) / 1024.0,
             static_cast<double>(sink_rss) / 1024.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "--one-gib") return one_gib(false);
  if (argc > 1 && std::string_view(argv[1]) == "--one-gib-with-sink") return one_gib(true);
  const int lines = argc > 1 ? std::atoi(argv[1]) : 100;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  if (const int status = latency_part(lines); status != 0) return status;
  return gib_part("/proc/self/exe", rounds);
}
