#include "skip.hpp"

#include <doctest/doctest.h>
#ifdef _WIN32
#include <fstream>
#else
#include <fcntl.h>
#include <unistd.h>
#endif

#include <cstdlib>
#include <iostream>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace psych::testing {
namespace {

struct skip_record {
  std::string where;  // the case, then each subcase it was in: "case / subcase"
  std::string reason;
  std::string location;  // file:line of the skip_case call
  auto operator<=>(const skip_record&) const = default;
};

/// What the listener below sees of the run, and what skip_case adds to it. doctest runs cases on
/// one thread, but a case may call skip_case from a thread of its own.
struct run_state {
  std::mutex mutex;
  std::ostream* out = &std::cout;
  std::string binary;
  std::string current_case;
  std::vector<std::string> subcases;
  bool entry_open = false;
  bool entry_skipped = false;
  int entries_run = 0;      // each pass through a case (one per leaf subcase)
  int entries_skipped = 0;  // of which skip_case was called in
  std::set<std::string> cases_run, cases_skipped;
  std::set<skip_record> skips;
  std::vector<skip_record> in_order;
};

run_state& state() {
  static run_state s;
  return s;
}

void close_entry(run_state& s) {
  if (!s.entry_open) return;
  s.entry_open = false;
  ++s.entries_run;
  if (s.entry_skipped) ++s.entries_skipped;
}

void open_entry(run_state& s, const char* name) {
  close_entry(s);
  s.current_case = name;
  s.cases_run.insert(name);
  s.subcases.clear();
  s.entry_open = true;
  s.entry_skipped = false;
}

std::string location_of(const std::source_location& where) {
  std::string file = where.file_name();
  if (const auto slash = file.rfind('/'); slash != std::string::npos) {
    // Keep the directory the file is in: conformance/, tests/launcher/, ...
    const auto before = file.rfind('/', slash - 1);
    file = file.substr(before == std::string::npos ? 0 : before + 1);
  }
  return file + ":" + std::to_string(where.line());
}

/// One line per skip in $PSYCH_SKIP_LOG, which scripts/test sums up across binaries. One
/// write(2) in append mode each, so binaries run in parallel do not interleave within a line.
void append_to_log(const std::string& binary, const skip_record& record) {
  const char* path = std::getenv("PSYCH_SKIP_LOG");
  if (path == nullptr || *path == '\0') return;
  const std::string line = binary + "\t" + record.where + "\t" + record.reason + "\n";
#ifdef _WIN32
  // The Windows launcher's test binary (tests/windows_launcher), the only one built for Windows.
  std::ofstream(path, std::ios::app | std::ios::binary) << line;
#else
  const int fd = ::open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  [[maybe_unused]] const auto written = ::write(fd, line.data(), line.size());
  ::close(fd);
#endif
}

void record_skip(std::string_view reason, const std::source_location& where, const char* ci_note) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  skip_record record{.where = s.current_case.empty() ? "(outside any test case)" : s.current_case,
                     .reason = std::string(reason),
                     .location = location_of(where)};
  for (const auto& subcase : s.subcases) record.where += " / " + subcase;
  s.entry_skipped = true;
  s.cases_skipped.insert(s.current_case);
  if (!s.skips.insert(record).second) return;  // a case re-entered for its next subcase
  s.in_order.push_back(record);
  *s.out << "SKIPPED " << record.where << ": " << record.reason << ci_note << " (" << record.location << ")"
         << std::endl;
  append_to_log(s.binary, record);
}

/// Listens to the run: which case and subcase is current, and at the end the skips in sum.
struct skip_listener : doctest::IReporter {
  explicit skip_listener(const doctest::ContextOptions& options) {
    auto& s = state();
    std::lock_guard lock(s.mutex);
    if (options.cout != nullptr) s.out = options.cout;
    std::string binary = options.binary_name.c_str();
    if (const auto slash = binary.find_last_of("/\\"); slash != std::string::npos) binary.erase(0, slash + 1);
    s.binary = binary;
  }

  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}

  void test_run_end(const doctest::TestRunStats&) override {
    std::lock_guard lock(state().mutex);
    close_entry(state());
  }

  void test_case_start(const doctest::TestCaseData& data) override {
    std::lock_guard lock(state().mutex);
    open_entry(state(), data.m_name);
  }
  void test_case_reenter(const doctest::TestCaseData& data) override {
    std::lock_guard lock(state().mutex);
    open_entry(state(), data.m_name);
  }
  void test_case_end(const doctest::CurrentTestCaseStats&) override {
    std::lock_guard lock(state().mutex);
    close_entry(state());
  }
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature& signature) override {
    std::lock_guard lock(state().mutex);
    state().subcases.emplace_back(signature.m_name.c_str());
  }
  void subcase_end() override {
    std::lock_guard lock(state().mutex);
    if (!state().subcases.empty()) state().subcases.pop_back();
  }
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

REGISTER_LISTENER("psych-skips", 1, skip_listener);

bool ci_requires_every_case() {
  const char* ci = std::getenv("CI");
  if (ci == nullptr) return false;
  const std::string_view value{ci};
#ifdef _WIN32
  // No root on Windows: the CI matrix's Windows job has every mechanism the launcher uses.
  return value == "true" || value == "1";
#else
  return (value == "true" || value == "1") && ::geteuid() == 0;
#endif
}

void skip_case(std::string_view reason, std::source_location where) {
  if (ci_requires_every_case()) {
    ADD_FAIL_CHECK_AT(where.file_name(), static_cast<int>(where.line()),
                      "skipped in CI (CI=true, root), where every case must run: " << std::string(reason));
    return;
  }
  record_skip(reason, where, "");
}

void skip_case(allowed_in_ci kind, std::string_view reason, std::source_location where) {
  const char* note = "";
  if (ci_requires_every_case()) {
    switch (kind) {
      case allowed_in_ci::landlock_abi_predates_feature: note = " [allowed in CI: the kernel's Landlock ABI]"; break;
      case allowed_in_ci::documented_backend_limit: note = " [allowed in CI: a documented backend limit]"; break;
      case allowed_in_ci::no_windows_cpython_under_wine: note = " [allowed in CI: no Windows CPython under Wine]"; break;
      case allowed_in_ci::no_symbolic_links_under_wine: note = " [allowed in CI: no symbolic links under Wine]"; break;
      case allowed_in_ci::no_dacls_under_wine: note = " [allowed in CI: no DACLs under Wine]"; break;
      case allowed_in_ci::no_job_limits_under_wine: note = " [allowed in CI: no job limits under Wine]"; break;
    }
  }
  record_skip(reason, where, note);
}

namespace {

/// After doctest's own summary, whose "passed" counts a case that returned after skip_case.
void print_summary(run_state& s, bool only_skips) {
  if (s.cases_run.empty() && s.in_order.empty()) return;  // --help, --list-test-cases, ...
  if (!s.in_order.empty()) {
    *s.out << "[psych] skipped here, each with why (docs/testing.md):\n";
    for (const auto& record : s.in_order)
      *s.out << "  " << record.where << ": " << record.reason << " (" << record.location << ")\n";
  }
  *s.out << "[psych] " << s.in_order.size() << " skipped | test cases: " << s.cases_run.size() << " run, "
         << s.cases_run.size() - s.cases_skipped.size() << " in full, " << s.cases_skipped.size()
         << " skipped in whole or in part (doctest's \"passed\" above includes them)";
  if (only_skips) *s.out << " | nothing ran but skips: exit " << skip_exit_code << " (skipped)";
  *s.out << std::endl;
}

}  // namespace

int exit_status(int doctest_status) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  close_entry(s);
  const bool only_skips = doctest_status == 0 && s.entries_run > 0 && s.entries_skipped == s.entries_run;
  print_summary(s, only_skips);
  if (doctest_status != 0) return doctest_status;
  return only_skips ? skip_exit_code : 0;
}

}  // namespace psych::testing
