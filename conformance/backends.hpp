#pragma once
// The conformance suite is one body of cases run against every backend.
// A backend that cannot be built here is skipped with its reason; a skip is
// never evidence of support.
#include <doctest/doctest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "psych/host/sandbox.hpp"

namespace conformance {

struct backend_under_test {
  std::string name;
  psych::local_sandbox_options options;
};

/// Every backend the suite knows, available here or not.
const std::vector<backend_under_test>& backends();

/// Runs body once per backend, each as its own SUBCASE; unavailable backends
/// are reported as skipped with the reason.
void for_each_backend(const std::function<void(psych::sandbox&, const backend_under_test&)>& body);

/// The terms a runtime would compute: the backend's offer, narrowed by the request.
psych::execution_terms terms_for(const psych::sandbox& sandbox, psych::code_execution_limits limits = {},
                                 psych::isolation_level isolation = psych::isolation_level::process);

/// Runs one program with default test limits (a 20 s wall clock unless asked).
psych::sandbox_result run(psych::sandbox& sandbox, std::string program, psych::code_execution_limits limits = {},
                          std::stop_token stop = {});

/// The uid the suite's children run as, distinct from other tests'.
inline constexpr std::int64_t suite_uid = 1'500'100;

/// Processes of the suite's uid still alive, and entries left in its temp root.
std::vector<int> processes_of(std::int64_t uid);
std::vector<std::string> leftovers_in_temp_root();
const std::string& temp_root();

}  // namespace conformance
