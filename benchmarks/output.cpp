// Output: what a flood of stdout costs the host. Each stream is captured by stream_capture,
// bounded by output_policy.max_bytes (8 MiB here); the rest is counted, not kept. Measured
// through the real sandbox, each run in a forked child of this process so that the child's
// VmHWM (/proc/self/status) is the host's peak for that run alone:
//   1. 1 GiB written in 1 MiB chunks, beside `head -c 1G /dev/zero` and `dd bs=1M` each drained
//      from a plain pipe into a 64 KiB buffer in the same run; the drain rate, the ratios, the
//      host's peak;
//   2. one single line of 1 GiB, and 10^7 empty lines: time and the host's peak.
//   3. read_tool_output on a 256 MiB blob: a line window at its end, and a pattern search through
//      it; time, and the growth of this process's peak RSS (reset through /proc/self/clear_refs).
// Targets: peak <= 2 * max_bytes + 16 MiB; drain rate >= half the plain pipe's; a window of the
// blob grows the peak by <= 16 MiB.
// Prints human lines and one "BENCH name value unit" line per figure.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "psych/host/blob_store.hpp"
#include "psych/host/read_tool_output.hpp"
#include "psych/host/sandbox.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

constexpr std::uint64_t mib = std::uint64_t{1} << 20;
constexpr std::uint64_t gib = std::uint64_t{1} << 30;
constexpr std::uint64_t max_bytes = 8 * mib;
constexpr std::uint64_t peak_target = 2 * max_bytes + 16 * mib;

/// VmHWM of this process, in bytes (the kernel reports kB).
std::uint64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  return 0;
}

/// What a forked child reports about its one sandboxed run; plain bytes over a pipe.
struct child_report {
  bool ran = false;   ///< the run returned a value
  bool exact = true;  ///< every byte kept is the byte the program wrote
  double run_seconds = 0;      ///< run(), as the host saw it
  double program_seconds = 0;  ///< first write to last write, inside the program
  double duration_seconds = 0;  ///< result.duration_seconds
  std::uint64_t stdout_size = 0, stdout_kept = 0, stderr_size = 0;
  std::uint64_t peak_before = 0, peak_after = 0;
  char isolation[32] = {};  ///< what the execution reached
  char message[512] = {};
};

/// What the program writes, and how to recognise a byte it wrote.
struct flood {
  const char* label;
  const char* bench_name;
  std::uint64_t total;  ///< bytes the program writes
  std::string program;
  std::function<bool(std::string_view kept)> check;
};

/// A program writing `total` bytes of `fill` to fd 1 in 1 MiB chunks, with `last` as its final byte.
std::string writer(std::uint64_t total, const char* fill, const char* last) {
  return fmt::format(
      "import os, time\n"
      "total, chunk = {}, {}\n"
      "block = {} * chunk\n"
      "start = time.perf_counter()\n"
      "left = total\n"
      "while left:\n"
      "    n = min(chunk, left)\n"
      "    view = memoryview(block)[:n] if n != chunk else memoryview(block)\n"
      "    if left == n:\n"
      "        view = memoryview(bytes(view[:-1]) + {})\n"
      "    while view:\n"
      "        view = view[os.write(1, view):]\n"
      "    left -= n\n"
      "return time.perf_counter() - start",
      total, mib, fill, last);
}

/// Runs the flood through a fresh sandbox in a forked child; the report comes back through a pipe.
child_report run_in_child(const flood& f) {
  int fds[2];
  if (::pipe(fds) != 0) std::abort();
  const pid_t pid = ::fork();
  if (pid < 0) std::abort();
  if (pid == 0) {
    ::close(fds[0]);
    child_report report;
    const auto say = [&](const std::string& what) {
      std::snprintf(report.message, sizeof report.message, "%s", what.c_str());
    };
    psych::local_sandbox_options options;
    // The ceiling's default wall clock is 30 s; run() narrows terms to the ceiling, so raise it here.
    options.limit_ceiling.wall_seconds = 120.0;
    auto made = psych::local_sandbox(options);
    if (!made) {
      say(made.error().message());
    } else {
      auto& sandbox = *made.value();
      const auto offer = sandbox.offer();
      auto terms =
          std::get<psych::execution_terms>(psych::intersect_terms(offer, {.limits = offer.limit_ceiling}, {}, {}));
      terms.output.max_bytes = max_bytes;
      terms.limits.wall_seconds = 120.0;
      report.peak_before = peak_rss_bytes();
      const auto start = clock_type::now();
      auto result = sandbox.run({.program = f.program, .terms = terms});
      report.run_seconds = std::chrono::duration<double>(clock_type::now() - start).count();
      report.peak_after = peak_rss_bytes();
      report.stdout_size = result.stdout_size;
      report.stdout_kept = result.stdout_data.size();
      report.stderr_size = result.stderr_size;
      report.duration_seconds = result.duration_seconds;
      report.exact = f.check(result.stdout_data);
      if (result.isolation)
        std::snprintf(report.isolation, sizeof report.isolation, "%s", std::string(psych::name_of(*result.isolation)).c_str());
      if (result.ok() && result.value) {
        report.ran = true;
        report.program_seconds = std::stod(result.value->text);
      } else {
        say(result.failure ? fmt::format("{}: {}", psych::name_of(result.failure->kind), result.failure->message)
                           : "no value");
      }
    }
    const auto* bytes = reinterpret_cast<const char*>(&report);
    for (std::size_t sent = 0; sent < sizeof report;) {
      const auto n = ::write(fds[1], bytes + sent, sizeof report - sent);
      if (n <= 0) ::_exit(1);
      sent += static_cast<std::size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  child_report report;
  auto* bytes = reinterpret_cast<char*>(&report);
  std::size_t got = 0;
  while (got < sizeof report) {
    const auto n = ::read(fds[0], bytes + got, sizeof report - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (got != sizeof report) {
    fmt::print(stderr, "bench_output: the child for {} died without a report\n", f.label);
    std::exit(1);
  }
  return report;
}

/// `argv` (writing `bytes` to its stdout) drained from a plain pipe into a 64 KiB buffer; seconds.
double plain_pipe_seconds(const std::vector<std::string>& command, std::uint64_t bytes) {
  int fds[2];
  if (::pipe(fds) != 0) std::abort();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  std::vector<char*> argv;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  char* env[] = {nullptr};
  const auto start = clock_type::now();
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), env) != 0) std::abort();
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  std::array<char, 64 * 1024> buffer{};
  std::uint64_t total = 0;
  for (;;) {
    const auto n = ::read(fds[0], buffer.data(), buffer.size());
    if (n <= 0) break;
    total += static_cast<std::uint64_t>(n);
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  if (total != bytes || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fmt::print(stderr, "bench_output: {} gave {} bytes of {}\n", command.front(), total, bytes);
    std::exit(1);
  }
  return seconds;
}

const char* verdict(bool met) { return met ? "PASS" : "MISS"; }

/// Prints one flood's figures; false when the run failed or the counts are wrong.
bool report_of(const flood& f, const child_report& r) {
  const double mib_of = 1.0 / static_cast<double>(mib);
  fmt::print("{}: {} bytes ({})\n", f.label, f.total, r.isolation);
  if (!r.ran) {
    fmt::print("  the run failed: {}\n", r.message);
    return false;
  }
  const bool counted = r.stdout_size == f.total;
  const bool kept = r.stdout_kept == std::min(f.total, max_bytes);
  fmt::print("  stdout_size {} (produced {}: {}), stdout_data {} bytes (max_bytes {}: {}), bytes kept {}, "
             "stderr_size {}\n",
             r.stdout_size, f.total, counted ? "equal" : "DIFFERENT", r.stdout_kept, max_bytes,
             kept ? "truncated as asked" : "WRONG", r.exact ? "as written" : "CORRUPT", r.stderr_size);
  fmt::print("  run() {:.3f} s, in the program {:.3f} s, result.duration_seconds {:.3f} s\n", r.run_seconds,
             r.program_seconds, r.duration_seconds);
  const bool bounded = r.peak_after <= peak_target;
  fmt::print("  host peak (VmHWM of the forked host) {:.1f} MiB, {:.1f} MiB before run(): +{:.1f} MiB "
             "(target <= {} MiB): {}\n",
             static_cast<double>(r.peak_after) * mib_of, static_cast<double>(r.peak_before) * mib_of,
             static_cast<double>(r.peak_after - r.peak_before) * mib_of, peak_target / mib, verdict(bounded));
  fmt::print("BENCH {}_seconds {:.3f} s\n", f.bench_name, r.run_seconds);
  fmt::print("BENCH {}_host_peak_mib {:.1f} MiB\n", f.bench_name, static_cast<double>(r.peak_after) * mib_of);
  fmt::print("BENCH {}_host_growth_mib {:.1f} MiB\n", f.bench_name,
             static_cast<double>(r.peak_after - r.peak_before) * mib_of);
  return counted && kept && r.exact && r.stderr_size == 0;
}

bool all_of(std::string_view kept, char c) {
  return std::all_of(kept.begin(), kept.end(), [c](char k) { return k == c; });
}

/// A field of /proc/self/status in bytes (the kernel reports kB).
std::uint64_t status_bytes(std::string_view field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.starts_with(field)) return std::strtoull(line.c_str() + field.size(), nullptr, 10) * 1024;
  return 0;
}

/// Windows of a 256 MiB blob of 64-byte lines: the time each takes and how far the peak RSS grows.
bool blob_windows() {
  constexpr std::uint64_t blob_bytes = 256 * mib;
  constexpr std::uint64_t growth_target = 16 * mib;
  std::string root = "/tmp/psych-bench-blobs-XXXXXX";
  if (::mkdtemp(root.data()) == nullptr) {
    fmt::print("blob windows: mkdtemp failed: {}\n", std::strerror(errno));
    return false;
  }
  struct cleanup {
    std::string path;
    ~cleanup() { std::filesystem::remove_all(path); }
  } removed{root};
  auto opened = psych::open_directory_blob_store(root + "/store");
  if (!opened) {
    fmt::print("blob windows: {}\n", opened.error().message());
    return false;
  }
  auto& store = *opened.value();
  std::string handle;
  std::uint64_t lines = 0;
  {
    std::string bytes;
    bytes.reserve(blob_bytes);
    for (; bytes.size() < blob_bytes; ++lines)
      bytes += fmt::format("line {:>12} {:.>45}\n", lines, lines % 100000 == 99999 ? "needle" : "hay");
    auto stored = store.put("bench", "text/plain", bytes);
    if (!stored) {
      fmt::print("blob windows: put: {}\n", stored.error().message());
      return false;
    }
    handle = stored.value().handle;
  }  // freed: from here the process holds no copy of the blob

  bool fine = true;
  const auto measure = [&](const char* label, const char* bench_name, const psych::output_request& request,
                           std::uint64_t expected_lines) {
    const std::uint64_t before = status_bytes("VmRSS:");
    std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM := VmRSS, so the peak is this read's
    const auto start = clock_type::now();
    const auto window = psych::read_tool_output(store, "bench", handle, request);
    const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
    const std::uint64_t peak = status_bytes("VmHWM:");
    const std::uint64_t growth = peak > before ? peak - before : 0;
    const bool right = window && window.value().total_lines == lines && window.value().lines.size() == expected_lines;
    const bool bounded = growth <= growth_target;
    fmt::print("{} of a 256 MiB blob: {:.3f} s ({:.0f} MiB/s), peak grew {:.2f} MiB (target <= {} MiB): {}{}\n",
               label, seconds, static_cast<double>(blob_bytes / mib) / seconds,
               static_cast<double>(growth) / static_cast<double>(mib), growth_target / mib, verdict(bounded && right),
               right ? "" : (window ? " (wrong window)" : " (" + window.error().message() + ")"));
    fmt::print("BENCH {}_seconds {:.3f} s\n", bench_name, seconds);
    fmt::print("BENCH {}_peak_growth_mib {:.2f} MiB\n", bench_name, static_cast<double>(growth) / static_cast<double>(mib));
    fine = fine && bounded && right;
  };
  measure("a window of the last 10 lines", "blob_window_256mib", {.offset = lines - 10, .limit = 10}, 10);
  measure("a pattern search through all lines", "blob_search_256mib", {.limit = 1000, .pattern = "needle$"},
          lines / 100000);
  return fine;
}

}  // namespace

int main() {
  const flood zeros{"1 GiB of zeros in 1 MiB chunks", "drain_1gib", gib, writer(gib, "b'\\0'", "b'\\0'"),
                    [](std::string_view kept) { return all_of(kept, '\0'); }};
  const flood line{"one line of 1 GiB, its newline last", "single_line_1gib", gib, writer(gib, "b'x'", "b'\\n'"),
                   [](std::string_view kept) { return all_of(kept, 'x'); }};
  constexpr std::uint64_t lines = 10'000'000;
  const flood empty{"10^7 empty lines", "empty_lines_1e7", lines, writer(lines, "b'\\n'", "b'\\n'"),
                    [](std::string_view kept) { return all_of(kept, '\n'); }};

  // Side by side: each plain pipe before and after the sandboxed drain, the better of the two.
  // `head -c` writes 4-8 KiB at a time, so its pipeline is bound by head itself; `dd bs=1M` writes
  // the 1 MiB chunks the program writes, and is the fair baseline.
  const std::vector<std::string> head{"/usr/bin/head", "-c", std::to_string(gib), "/dev/zero"};
  const std::vector<std::string> dd{"/usr/bin/dd", "if=/dev/zero", "bs=1M", fmt::format("count={}", gib / mib),
                                    "status=none"};
  const double head_first = plain_pipe_seconds(head, gib);
  const double dd_first = plain_pipe_seconds(dd, gib);
  const auto drained = run_in_child(zeros);
  const double head_seconds = std::min(head_first, plain_pipe_seconds(head, gib));
  const double dd_seconds = std::min(dd_first, plain_pipe_seconds(dd, gib));

  bool fine = report_of(zeros, drained);
  if (drained.ran) {
    const double gib_in_mib = static_cast<double>(gib / mib);
    const double rate = gib_in_mib / drained.run_seconds;
    fmt::print("  drain rate {:.0f} MiB/s over run() (in the program {:.0f} MiB/s)\n", rate,
               gib_in_mib / drained.program_seconds);
    fmt::print("BENCH drain_mib_per_second {:.0f} MiB/s\n", rate);
    const auto beside = [&](const char* label, const char* bench_name, double seconds) {
      const double plain_rate = gib_in_mib / seconds;
      const double ratio = rate / plain_rate;
      fmt::print("  a plain pipe from {} into 64 KiB reads: {:.0f} MiB/s; the drain is {:.2f}x (target >= 0.50x): {}\n",
                 label, plain_rate, ratio, verdict(ratio >= 0.5));
      fmt::print("BENCH {}_mib_per_second {:.0f} MiB/s\n", bench_name, plain_rate);
      fmt::print("BENCH drain_ratio_to_{} {:.3f} x\n", bench_name, ratio);
    };
    beside("`head -c 1G /dev/zero`", "plain_pipe_head", head_seconds);
    beside("`dd if=/dev/zero bs=1M count=1024`", "plain_pipe_dd", dd_seconds);
  }
  fine = report_of(line, run_in_child(line)) && fine;
  fine = report_of(empty, run_in_child(empty)) && fine;
  fine = blob_windows() && fine;
  return fine ? 0 : 1;
}
