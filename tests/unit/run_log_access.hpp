#pragma once
// Opening a file run log and reading its records back, failing the case on any error.
#include <memory>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "psych/host/run_log.hpp"

namespace psych::testing {

inline std::unique_ptr<run_log> open_log(const std::string& path) {
  auto log = open_file_run_log(path);
  if (!log) FAIL(log.error().message());
  return std::move(log).value();
}

inline std::vector<run_log_record> records_of(const run_log& log) {
  auto records = log.records();
  REQUIRE(records);
  return std::move(records).value();
}

}  // namespace psych::testing
