// Soak: many executions back to back on each local backend, each program making one binding call
// whose result is large enough to be preserved in a blob store and journalled in a Run's log.
// After every batch it checks that nothing is left behind and that the host's memory is flat:
//   descriptors   /proc/self/fd holds as many as before the first execution;
//   processes     no child of this process, no process of the run_as uid;
//   mounts        /proc/self/mountinfo has as many lines as before the first execution;
//   cgroups       no psych-<pid>-<n> cgroup whose launcher is dead appeared;
//   temp dirs     the temp root is empty;
//   blob store    no temporary file (.tmp-*) is left in it, and none of its blobs is held open;
//   run log       the batch's log reopens (a leaked descriptor would still hold its flock) with
//                 exactly two records per execution, and no descriptor still names it;
//   RSS           VmRSS after the warm-up batches may grow by at most the stated tolerance.
// Usage: bench_soak [executions-per-backend = 2000] [backend ...]; a batch is 100 executions.
// Prints "BENCH soak_<backend>_<metric> value unit" lines and PASS or FAIL; exits 1 on a leak.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "host_leftovers.hpp"
#include "psych/host/blob_store.hpp"
#include "psych/host/blocking_invoker.hpp"
#include "psych/host/run_log.hpp"
#include "psych/host/sandbox.hpp"
#include "rss.hpp"

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

constexpr int batch = 100;
constexpr int skipped_exit_code = 77;
constexpr int warm_up_batches = 2;  // the allocator, the interpreter cache and the pools settle
constexpr std::int64_t rss_tolerance_kib = 8 * 1024;  // growth allowed after the warm-up
// Under AddressSanitizer RSS is printed, not judged (rss.hpp).
using psych::testing::rss_is_meaningful;
// A uid of its own, outside the block psych's tests and workers draw from (1,500,000 + 1024), so
// its processes are this soak's and nobody else's clean-up signals them.
constexpr std::int64_t run_as = 1'600'200;
// Over the budget's per-call result ceiling (set below), so every result is preserved as a blob.
constexpr std::size_t result_bytes = 4096;

std::vector<std::string> fd_targets() {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    out.push_back(fs::read_symlink(entry.path(), ec).string());
  }
  return out;  // includes the directory_iterator's own descriptor, the same every time
}

std::size_t line_count(const char* path) {
  std::ifstream in{path};
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

std::int64_t rss_kib() {
  std::ifstream in{"/proc/self/status"};
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("VmRSS:")) return std::atoll(line.c_str() + 6);
  return -1;
}

/// Processes (not threads) whose parent is this process.
std::vector<int> children() {
  std::vector<int> found;
  const int self = ::getpid();
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const auto name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat{entry.path() / "stat"};
    std::string text;
    std::getline(stat, text);
    const auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    int ppid = 0;
    char state = 0;
    if (std::sscanf(text.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == self)
      found.push_back(std::stoi(name));
  }
  return found;
}

using psych::testing::abandoned_cgroups;
using psych::testing::processes_of;

std::vector<std::string> entries(const fs::path& dir, bool recursive, std::string_view name_prefix = {}) {
  std::vector<std::string> out;
  std::error_code ec;
  const auto keep = [&](const fs::directory_entry& e) {
    if (e.path().filename().string().starts_with(name_prefix)) out.push_back(e.path().string());
  };
  if (recursive)
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      keep(*it);
  else
    for (const auto& e : fs::directory_iterator(dir, ec)) keep(e);
  return out;
}

std::string joined(const auto& items) {
  std::string out;
  for (const auto& item : items) out += fmt::format("{}{}", out.empty() ? "" : ", ", item);
  return out;
}

struct soak_figures {
  bool passed = true;
  double seconds = 0;
  std::int64_t rss_start_kib = 0, rss_warm_kib = 0, rss_end_kib = 0, rss_peak_kib = 0;
  std::size_t fds_start = 0, fds_end = 0;
};

class soak {
 public:
  soak(std::string backend, int executions) : backend_{std::move(backend)}, executions_{executions} {}

  soak_figures run() {
    char root_template[] = "/tmp/psych-soak-XXXXXX";
    if (::mkdtemp(root_template) == nullptr) fail_setup("mkdtemp(/tmp/psych-soak-XXXXXX) failed");
    root_ = root_template;
    ::chmod(root_.c_str(), 0711);  // the sandbox user passes through to its own execution directory
    fs::create_directory(root_ / "temp");
    ::chmod((root_ / "temp").c_str(), 0711);
    figures_ = {};
    run_batches();
    fs::remove_all(root_);
    return figures_;
  }

 private:
  [[noreturn]] static void fail_setup(const std::string& why) {
    fmt::print(stderr, "bench_soak: {}\n", why);
    std::exit(2);
  }

  void leak(const std::string& what) {
    fmt::print("  LEAK {}: {}\n", backend_, what);
    figures_.passed = false;
  }

  void run_batches() {
    psych::local_sandbox_options options;
    options.isolation = backend_ == "linux-process" ? psych::isolation_level::process : psych::isolation_level::isolated;
    options.backend = backend_ == "linux-isolated" ? "linux-namespaces" : backend_;
    options.run_as_uid = options.run_as_gid = run_as;
    options.temp_root = (root_ / "temp").string();
    options.allow_same_uid = ::geteuid() != 0;
    auto made = psych::local_sandbox(options);
    if (!made) {
      // A host without this backend cannot soak it: a skip (ctest's SKIP_RETURN_CODE), except in
      // CI, whose hosts have every mechanism, where it is a failure.
      const char* ci = std::getenv("CI");
      fmt::print(stderr, "bench_soak: {} unavailable: {}\n", backend_, made.error().message());
      std::exit(ci != nullptr && std::string_view{ci} == "true" ? 2 : skipped_exit_code);
    }
    psych::sandbox& sandbox = *made.value();
    const auto offer = sandbox.offer();
    auto decided = psych::intersect_terms(offer, {.limits = offer.limit_ceiling}, {.isolation = options.isolation}, {});
    if (!std::holds_alternative<psych::execution_terms>(decided)) fail_setup(backend_ + ": the terms were refused");
    const auto terms = std::get<psych::execution_terms>(decided);

    auto blobs = psych::open_directory_blob_store((root_ / "blobs").string());
    if (!blobs) fail_setup(blobs.error().message());
    // The tool blocks on a pool thread, as a runtime's tools do; its result differs per call, so
    // every call preserves a new blob.
    psych::blocking_invoker invoker{
        [](const psych::tool_call&) { return psych::call_permission::allow(); },
        [](const psych::owned_tool_call& call, std::stop_token) {
          return psych::tool_outcome::value(
              fmt::format("{{\"call\":\"{}\",\"pad\":\"{:x<{}}\"}}", call.execution_id, "", result_bytes));
        }};
    psych::binding_budget budget;
    budget.max_result_bytes.value = 1024;

    const std::size_t mounts_before = line_count("/proc/self/mountinfo");
    const auto abandoned_list = abandoned_cgroups();
    const std::set<std::string> abandoned_before(abandoned_list.begin(), abandoned_list.end());
    figures_.rss_start_kib = rss_kib();
    const std::vector<std::string> fds_before = fd_targets();
    figures_.fds_start = fds_before.size();
    fmt::print("{}: {} executions, one binding call each, checked every {}\n", backend_, executions_, batch);
    fmt::print("  {:>6} {:>9} {:>5} {:>8}\n", "done", "rss_kib", "fds", "ms/exec");

    const auto start = clock_type::now();
    for (int done = 0, number = 0; done < executions_; ++number) {
      const fs::path log_path = root_ / fmt::format("run-{}.log", number);
      const auto batch_start = clock_type::now();
      int in_batch = 0;
      {
        auto log = psych::open_file_run_log(log_path.string());
        if (!log) fail_setup(log.error().message());
        for (; in_batch < batch && done < executions_; ++in_batch, ++done) {
          const std::string id = fmt::format("e{}", done);
          const auto result = sandbox.run({.program = "r = await call_tool('fetch', {})\nreturn r.size",
                                           .terms = terms,
                                           .bindings = {{"fetch", "a large result"}},
                                           .invoker = &invoker,
                                           .budget = budget,
                                           .run = {.log = log.value().get(), .execution_id = id},
                                           .blobs = blobs.value().get()});
          if (!result.ok() || !result.value || result.bindings_spent.calls != 1 ||
              result.bindings_spent.preserved == 0) {
            leak(fmt::format("execution {} did not make its preserved call: {} value={} calls={} preserved={}", done,
                             result.failure ? result.failure->message : "ok",
                             result.value ? result.value->text : "none", result.bindings_spent.calls,
                             result.bindings_spent.preserved));
            return;
          }
        }
      }
      const double ms_per_exec =
          std::chrono::duration<double, std::milli>(clock_type::now() - batch_start).count() / in_batch;

      // The batch's Run log: it reopens (no descriptor anywhere still holds its flock) and has a
      // started and a finished record for every execution.
      if (auto reopened = psych::open_file_run_log(log_path.string()); !reopened) {
        leak(fmt::format("run log {} does not reopen: {}", log_path.string(), reopened.error().message()));
      } else if (const auto records = reopened.value()->records(); !records || records.value().size() != 2u * in_batch) {
        leak(fmt::format("run log {} has {} records for {} executions", log_path.string(),
                         records ? records.value().size() : 0, in_batch));
      }
      fs::remove(log_path);

      const auto fds = fd_targets();
      for (const auto& target : fds)  // the blob store's own root descriptor is among those at the start
        if (target.starts_with(root_.string()) && !std::ranges::count(fds_before, target))
          leak("a descriptor still open on " + target);
      if (fds.size() != figures_.fds_start)
        leak(fmt::format("{} descriptors open, {} before the first execution: {}", fds.size(), figures_.fds_start,
                         joined(fds)));
      if (const auto c = children(); !c.empty()) leak("child processes left: " + joined(c));
      if (const auto p = processes_of(run_as); !p.empty()) leak(fmt::format("processes of uid {} left: {}", run_as, joined(p)));
      if (const auto m = line_count("/proc/self/mountinfo"); m != mounts_before)
        leak(fmt::format("{} mounts, {} before", m, mounts_before));
      for (const auto& cgroup : abandoned_cgroups())
        if (!abandoned_before.contains(cgroup)) leak("abandoned cgroup " + cgroup);
      if (const auto t = entries(root_ / "temp", false); !t.empty()) leak("temp root not empty: " + joined(t));
      if (const auto t = entries(root_ / "blobs", true, ".tmp-"); !t.empty()) leak("blob store temporaries: " + joined(t));

      const std::int64_t rss = rss_kib();
      figures_.rss_peak_kib = std::max(figures_.rss_peak_kib, rss);
      if (number + 1 == warm_up_batches) figures_.rss_warm_kib = rss;
      figures_.rss_end_kib = rss;
      figures_.fds_end = fds.size();
      fmt::print("  {:>6} {:>9} {:>5} {:>8.1f}\n", done, rss, fds.size(), ms_per_exec);
      std::fflush(stdout);
    }
    figures_.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
    if (figures_.rss_warm_kib == 0) figures_.rss_warm_kib = figures_.rss_start_kib;  // fewer batches than the warm-up
    if (rss_is_meaningful && figures_.rss_end_kib - figures_.rss_warm_kib > rss_tolerance_kib)
      leak(fmt::format("RSS grew from {} KiB after the warm-up to {} KiB (tolerance {} KiB)", figures_.rss_warm_kib,
                       figures_.rss_end_kib, rss_tolerance_kib));
  }

  std::string backend_;
  int executions_;
  fs::path root_;
  soak_figures figures_;
};

}  // namespace

int main(int argc, char** argv) {
  const int executions = argc > 1 ? std::atoi(argv[1]) : 2000;
  std::vector<std::string> backends;
  for (int i = 2; i < argc; ++i) backends.emplace_back(argv[i]);
  if (backends.empty()) backends = {"linux-process", "linux-isolated"};
  if (executions <= 0) {
    fmt::print(stderr, "usage: bench_soak [executions-per-backend] [linux-process|linux-isolated ...]\n");
    return 2;
  }

  bool passed = true;
  for (const auto& backend : backends) {
    const soak_figures f = soak{backend, executions}.run();
    const std::string b = backend == "linux-process" ? "process" : "isolated";
    fmt::print("BENCH soak_{}_seconds {:.1f} s\n", b, f.seconds);
    fmt::print("BENCH soak_{}_ms_per_execution {:.1f} ms\n", b, f.seconds * 1e3 / executions);
    fmt::print("BENCH soak_{}_rss_start {} KiB\n", b, f.rss_start_kib);
    fmt::print("BENCH soak_{}_rss_after_warm_up {} KiB\n", b, f.rss_warm_kib);
    fmt::print("BENCH soak_{}_rss_end {} KiB\n", b, f.rss_end_kib);
    fmt::print("BENCH soak_{}_rss_peak {} KiB\n", b, f.rss_peak_kib);
    fmt::print("BENCH soak_{}_rss_growth_after_warm_up {} KiB\n", b, f.rss_end_kib - f.rss_warm_kib);
    fmt::print("BENCH soak_{}_fds_start {} fds\n", b, f.fds_start);
    fmt::print("BENCH soak_{}_fds_end {} fds\n", b, f.fds_end);
    fmt::print("{} {}: {} executions\n", f.passed ? "PASS" : "FAIL", backend, executions);
    passed = passed && f.passed;
  }
  fmt::print("{}\n", passed ? "PASS" : "FAIL");
  return passed ? 0 : 1;
}
