#include "rlimits.hpp"

#include <cerrno>
#include <cmath>

#include <fmt/format.h>

namespace psych::launcher {

rlimit_plan plan_rlimits(const sandbox_limits& limits, std::int64_t open_files,
                         std::int64_t process_count_base) {
  rlimit_plan plan;
  // RLIMIT_CPU counts whole seconds; rounding up never cuts a program short of what it was granted.
  plan.cpu_soft = static_cast<rlim_t>(std::ceil(limits.cpu_seconds.value));
  plan.cpu_hard = plan.cpu_soft + 1;
  plan.address_space = static_cast<rlim_t>(limits.address_space_bytes.value);
  plan.file_size = static_cast<rlim_t>(limits.file_size_bytes.value);
  // RLIMIT_NPROC is a per-user ceiling, not a per-execution count: the uid's
  // existing tasks are added so the program gets the count it was granted.
  plan.process_count = static_cast<rlim_t>(limits.process_count.value) +
                       static_cast<rlim_t>(process_count_base);
  plan.open_files = static_cast<rlim_t>(open_files);
  return plan;
}

namespace {

setup_result<void> set_one(int resource, const char* name, rlim_t soft, rlim_t hard) {
  const rlimit value{soft, hard};
  if (::setrlimit(resource, &value) != 0)
    return fail(system_failure(launch_stage::rlimits, "setrlimit", errno, fmt::format("{}, {}, {}", name, soft, hard)));
  return success();
}

}  // namespace

setup_result<void> apply_rlimits(const rlimit_plan& plan) {
  PSYCH_TRY(set_one(RLIMIT_CPU, "RLIMIT_CPU", plan.cpu_soft, plan.cpu_hard));
  PSYCH_TRY(set_one(RLIMIT_AS, "RLIMIT_AS", plan.address_space, plan.address_space));
  PSYCH_TRY(set_one(RLIMIT_FSIZE, "RLIMIT_FSIZE", plan.file_size, plan.file_size));
  PSYCH_TRY(set_one(RLIMIT_NPROC, "RLIMIT_NPROC", plan.process_count, plan.process_count));
  PSYCH_TRY(set_one(RLIMIT_NOFILE, "RLIMIT_NOFILE", plan.open_files, plan.open_files));
  PSYCH_TRY(set_one(RLIMIT_CORE, "RLIMIT_CORE", 0, 0));
  return success();
}

applied_rlimits report_rlimits(const rlimit_plan& plan) {
  const auto as_int = [](rlim_t value) { return static_cast<std::int64_t>(value); };
  return applied_rlimits{.cpu_seconds = as_int(plan.cpu_soft),
                         .address_space_bytes = as_int(plan.address_space),
                         .file_size_bytes = as_int(plan.file_size),
                         .process_count = as_int(plan.process_count),
                         .open_files = as_int(plan.open_files),
                         .core_bytes = 0};
}

}  // namespace psych::launcher
