#pragma once
// The test child's hello report: what a process can observe of itself on Windows, in the
// contract's child_report, with the job it runs in read back from inside.
#include <string>

#include "psych/reports.hpp"

namespace psych::windows::test_child {

struct invocation {
  std::string token;
  std::string canary;
  std::int64_t ipv4_port = 0;
  std::int64_t ipv6_port = 0;
  std::string workspace;
};

child_report observe_self(const invocation& how);

}  // namespace psych::windows::test_child
