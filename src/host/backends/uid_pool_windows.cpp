// uid_pool.hpp on Windows, which has no uids to hand out: the Windows launcher runs the child as
// the worker's own account (identity is UNAVAILABLE there, docs/windows-launcher.md). No pool can
// be made, so no lease ever exists; the local backend never asks for one on Windows
// (local_sandbox.cpp), and these say why should anything else.
#include "backends/uid_pool.hpp"

#include <utility>

namespace psych::host {
namespace {

result<std::shared_ptr<uid_pool>> no_uids() {
  return fail_with(error_kind::sandbox_setup,
                 "Windows has no uids to run a child as: the child runs as the worker's own account (identity: "
                 "unavailable); leave run_as unset and pass allow_same_uid=true");
}

}  // namespace

uid_lease::uid_lease(uid_lease&& other) noexcept
    : pool_(std::move(other.pool_)), uid_(other.uid_), gid_(other.gid_), exclusive_(other.exclusive_),
      fd_(std::exchange(other.fd_, -1)) {}

uid_lease::~uid_lease() = default;

std::optional<std::string> uid_lease::release() { return std::nullopt; }

result<std::shared_ptr<uid_pool>> uid_pool::per_execution(const uid_range&) { return no_uids(); }

result<std::shared_ptr<uid_pool>> uid_pool::shared(std::int64_t, std::int64_t, const std::string&) { return no_uids(); }

uid_pool::~uid_pool() = default;

result<uid_lease> uid_pool::acquire() { return no_uids().error(); }

run_as_report uid_pool::report() { return {.mode = run_as_mode::worker, .first = -1, .count = 0}; }

std::vector<std::int64_t> ids_in_use() { return {}; }

}  // namespace psych::host
