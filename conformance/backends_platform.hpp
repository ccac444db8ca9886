#pragma once
// What each platform's backends file gives the shared part of the suite (backends_common.cpp):
// what it knows cannot run before opening a backend, and a census of what a case can leave on the
// host beyond the temp root, taken before the case and checked after it. Not for the cases themselves.
#include <cstdint>
#include <vector>

#include "backends.hpp"

namespace conformance::detail {

/// What was on the host before a case began, as far as the platform's census looks: on Windows,
/// the running processes named as the interpreter and the launcher; on POSIX nothing (the child's
/// uid is the suite's alone, so every process of it is the case's).
struct host_census {
  std::vector<std::int64_t> processes;
};

host_census census_before_case(const backend_under_test& backend);

/// Whether the platform knows, before opening it, that the backend cannot run here (on Windows, no
/// CPython named), having reported that as the case's skip or failure; POSIX never does.
bool reported_unavailable(const backend_under_test& backend);

/// Checks, as failed CHECKs, that the case left nothing since `before` (processes, containers,
/// executions on a service, cgroups); the temp root is backends_common.cpp's to check.
void check_nothing_left_since(const backend_under_test& backend, const host_census& before);

}  // namespace conformance::detail
