#pragma once
// What the Windows launcher's cases share, with the test child (test_windows_launcher.cpp) and with
// a real CPython (test_windows_python.cpp).
#include <doctest/doctest.h>

#include <source_location>
#include <string>
#include <vector>

#include "launcher_host.hpp"
#include "psych/grading.hpp"
#include "skip.hpp"

namespace psych::testing::windows {

/// The launcher was built and can run here (under Wine: wine64 is installed); otherwise the case
/// is skipped, saying why.
inline bool can_run(std::source_location where = std::source_location::current()) {
  if (const auto why = os::why_launcher_cannot_run()) {
    psych::testing::skip_case(*why, where);
    return false;
  }
  return true;
}

/// A run that went the whole way: started, hello, done, exit, and the launcher's status 0.
inline void check_completed(const execution& e) {
  INFO("launcher stderr: " << e.stderr_text);
  std::string answered_error;
  if (e.error)
    answered_error = std::string(e.error->stage.spelling()) + ", " + e.error->syscall + " (" + std::to_string(e.error->error_number) + "): " + e.error->message;
  INFO("the launcher answered error: " << answered_error);
  REQUIRE_FALSE(e.error);
  REQUIRE(e.started);
  REQUIRE(e.hello);
  REQUIRE(e.exit);
  CHECK(e.launcher_status == 0);
  CHECK(e.exit->survivors == 0);
}

inline grading_expectation expectation_for(const protocol::launch_frame& launch) {
  grading_expectation e;
  e.limits = launch.limits;
  e.network = launch.network;
  for (const auto& [key, value] : launch.environment) e.environment_keys.push_back(key);
  return e;
}

/// Variables Wine's own loader puts into every process it starts, whatever environment block
/// CreateProcessW was given; on Windows the child sees the block alone.
inline bool set_by_wine_itself(const std::string& name) { return name.starts_with("WINE") || name == "SystemDrive"; }

/// `items` joined with "; ", for a failed check's context.
inline std::string joined(const std::vector<std::string>& items) {
  std::string all;
  for (const auto& item : items) all += item + "; ";
  return all;
}

/// The child's hello graded against what launch asked and what the launcher read back; under Wine
/// the child also sees Wine's own loader variables, which are expected then.
inline containment_grade grade_of(const protocol::launch_frame& launch, const execution& e) {
  auto expect = expectation_for(launch);
  for (const auto& key : e.hello->report.environment_keys)
    if (set_by_wine_itself(key)) expect.environment_keys.push_back(key);
  return grade_containment(expect, e.started->mechanisms, e.hello->report);
}

/// The job read back no such limit (Wine): the case's limit cannot be held here. On Windows itself
/// that is a failure.
inline bool job_holds_limit(std::int64_t read_back, const char* what, std::source_location where = std::source_location::current()) {
  if (read_back > 0) return true;
  if (!os::under_wine()) {
    FAIL_CHECK("the Job Object reads its " << what << " back as unset on Windows itself");
    return false;
  }
  psych::testing::skip_case(psych::testing::allowed_in_ci::documented_backend_limit,
                            std::string("the Job Object reads its ") + what +
                                " back as unset (Wine 8 keeps no job limits; docs/windows-launcher.md): only a real "
                                "Windows run can show the limit end the program",
                            where);
  return false;
}

}  // namespace psych::testing::windows
