// Output flushing: what the bootstrap's flusher thread (start_flusher, in
// launchers/sandbox_runtime/bootstrap/flusher.py) costs a program that prints 10^6 lines. Side by
// side in one run, interleaved round by round:
//   1. the bootstrap as the launcher runs it, with the flusher (stdout flushed every 50 ms);
//   2. the same bootstrap source (the parts joined, as the build writes them) with
//      FLUSH_INTERVAL_SECONDS = 0, its internal switch: no flusher;
//   3. bare `python3 -I -S -c <the same loop>`, for reference.
// Each is spawned the way tests/bootstrap spawns the bootstrap (fd 3 a socketpair with the `run`
// frame already queued, fd 1 a pipe this process drains), and timed from spawn to exit with the
// pipe drained. Target: the flusher costs at most 10% (docs/output.md).
// Prints medians, the ratios, and one "BENCH name value unit" line per figure.
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "psych/host/sandbox.hpp"

#include "median.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

constexpr const char* loop = "for i in range(1000000):\n    print('line', i)\n";
constexpr std::uint64_t expected_bytes = 11'888'890;  // "line 0\n" ... "line 999999\n"
constexpr std::string_view switch_on = "FLUSH_INTERVAL_SECONDS = 0.05 ";
constexpr std::string_view switch_off = "FLUSH_INTERVAL_SECONDS = 0    ";

using psych::bench::median;

/// Spawns argv with fd 1 a pipe (drained here), fd 0 and 2 /dev/null, and fd 3 a socketpair end
/// holding `queued`; returns the seconds from spawn to exit, the child's CPU seconds (user + system,
/// every thread) and the bytes read from the pipe.
struct measured {
  double seconds = 0, cpu_seconds = 0;
  std::uint64_t bytes = 0;
};

measured run_once(const std::vector<std::string>& argv, const std::string& queued) {
  int out[2], pair[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) std::abort();
  if (!queued.empty() && ::write(pair[0], queued.data(), queued.size()) != static_cast<ssize_t>(queued.size()))
    std::abort();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pair[1], 3);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  char* env[] = {nullptr};
  pid_t pid = -1;
  const auto start = clock_type::now();
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), env) != 0) std::abort();
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  ::close(pair[1]);
  std::uint64_t total = 0;
  std::vector<char> buffer(1 << 16);
  for (ssize_t got; (got = ::read(out[0], buffer.data(), buffer.size())) != 0;) {
    if (got < 0) std::abort();
    total += static_cast<std::uint64_t>(got);
  }
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  ::close(out[0]);
  ::close(pair[0]);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fmt::print(stderr, "output_flush: {} exited with status {}\n", argv[0], status);
    std::exit(1);
  }
  const auto cpu = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return {seconds, cpu(usage.ru_utime) + cpu(usage.ru_stime), total};
}

struct contender {
  std::string label;
  std::string bench_name;
  std::vector<std::string> argv;
  std::string queued;
  std::vector<double> seconds, cpu_seconds;
};

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 9;
  auto probe = psych::local_sandbox({});
  if (!probe) {
    fmt::print(stderr, "output_flush: {}\n", probe.error().message());
    return 2;
  }
  const std::string python = probe.value()->describe().interpreter;
  std::stringstream read;
  read << std::ifstream(PSYCH_BOOTSTRAP_SOURCE).rdbuf();
  const std::string with_flusher = read.str();
  const auto at = with_flusher.find(switch_on);
  if (at == std::string::npos) {
    fmt::print(stderr, "output_flush: {} has no line starting {:?}\n", PSYCH_BOOTSTRAP_SOURCE, switch_on);
    return 2;
  }
  std::string without_flusher = with_flusher;
  without_flusher.replace(at, switch_on.size(), switch_off);

  const std::string workspace = std::filesystem::temp_directory_path();
  const std::string run_frame = R"({"type":"run","program":"for i in range(1000000):\n    print('line', i)\n"})" "\n";
  const auto bootstrap = [&](const std::string& source) {
    return std::vector<std::string>{python, "-I", "-S", "-c", source, "0123456789abcdef0123456789abcdef",
                                    "/nonexistent", "0", "0", workspace};
  };
  std::vector<contender> all{
      {"bootstrap, flusher every 50 ms", "flush_on_seconds", bootstrap(with_flusher), run_frame, {}},
      {"bootstrap, no flusher (switch off)", "flush_off_seconds", bootstrap(without_flusher), run_frame, {}},
      {"bare python3 -I -S -c <loop>", "flush_bare_seconds", {python, "-I", "-S", "-c", loop}, "", {}},
  };
  for (int i = 0; i < rounds + 1; ++i) {
    for (auto& one : all) {
      const auto m = run_once(one.argv, one.queued);
      if (m.bytes != expected_bytes) {
        fmt::print(stderr, "output_flush: {} wrote {} bytes, not {}\n", one.label, m.bytes, expected_bytes);
        return 1;
      }
      if (i > 0) {  // the first round warms the page cache
        one.seconds.push_back(m.seconds);
        one.cpu_seconds.push_back(m.cpu_seconds);
      }
    }
  }

  fmt::print("10^6 printed lines ({} bytes) to a pipe, {} interleaved rounds, interpreter {}\n", expected_bytes,
             rounds, python);
  fmt::print("  {:<36} {:>9} {:>9}\n", "(medians)", "wall", "cpu");
  for (const auto& one : all) {
    fmt::print("  {:<36} {:7.3f} s {:7.3f} s\n", one.label, median(one.seconds), median(one.cpu_seconds));
    fmt::print("BENCH {} {:.3f} s\n", one.bench_name, median(one.seconds));
    fmt::print("BENCH {} {:.3f} s\n", one.bench_name.substr(0, one.bench_name.size() - 7) + "cpu_seconds",
               median(one.cpu_seconds));
  }
  const auto ratio = [&](std::size_t a, std::size_t b, auto field) {
    return median(all[a].*field) / median(all[b].*field);
  };
  fmt::print("  flusher on / off: {:.3f}x wall, {:.3f}x cpu (target <= 1.10x); on / bare: {:.3f}x wall\n",
             ratio(0, 1, &contender::seconds), ratio(0, 1, &contender::cpu_seconds), ratio(0, 2, &contender::seconds));
  fmt::print("BENCH flush_on_ratio_to_off {:.3f} x\n", ratio(0, 1, &contender::seconds));
  fmt::print("BENCH flush_on_cpu_ratio_to_off {:.3f} x\n", ratio(0, 1, &contender::cpu_seconds));
  fmt::print("BENCH flush_on_ratio_to_bare {:.3f} x\n", ratio(0, 2, &contender::seconds));
  return 0;
}
