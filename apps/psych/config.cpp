#include "config.hpp"

#include <fmt/format.h>

#include "files.hpp"
#include "psych/protocol/json.hpp"

namespace psych::cli {

result<local_sandbox_options> load_config(const std::string& path, local_sandbox_options base) {
  auto text = read_whole_file(path);
  if (!text) return fail_with(error_kind::unreadable_file, "config " + text.error().detail);

  // A member the file names and psych does not know is an error: a misspelt limit, or one from an older
  // release, must not leave its dimension silently at the built-in ceiling.
  auto parsed = protocol::decode_json_strict<sandbox_config>(text.value(), {.max_bytes = 1u << 20, .max_depth = 8});
  if (!parsed) {
    auto e = parsed.error();
    e.detail = fmt::format("config {}: {}", path, e.detail);
    return e;
  }
  const auto& config = parsed.value();
  if (auto valid = validate_limits(config.limit_ceiling); !valid)
    return fail_with(error_kind::invalid_limit, fmt::format("config {}: limit_ceiling.{}", path, valid.error().detail));
  base.limit_ceiling = overlay(base.limit_ceiling, config.limit_ceiling);
  if (config.python_bin) base.python_bin = config.python_bin;
  if (!config.env_allowlist.empty()) base.env_allowlist = config.env_allowlist;
  if (config.allowed_hosts) {
    auto hosts = canonical_host_list(*config.allowed_hosts);
    if (!hosts) return fail_with(error_kind::invalid_argument, fmt::format("config {}: allowed_hosts: {}", path,
                                                                           hosts.error().detail));
    base.allowed_hosts = std::move(hosts).value();
  }
  if (config.allow_same_uid) base.allow_same_uid = *config.allow_same_uid;
  if (config.launcher_path) base.launcher_path = config.launcher_path;
  if (config.run_as_uid) base.run_as_uid = *config.run_as_uid;
  if (config.run_as_gid) base.run_as_gid = *config.run_as_gid;
  if (config.run_as_range) {
    const auto& range = *config.run_as_range;
    if (range.first) base.run_as_range.first = *range.first;
    if (range.count) base.run_as_range.count = *range.count;
    if (range.lock_dir) base.run_as_range.lock_dir = *range.lock_dir;
  }
  if (config.temp_root) base.temp_root = *config.temp_root;
  if (config.backend) base.backend = config.backend;
  if (config.pool) {
    const auto& pool = *config.pool;
    constexpr std::int64_t most_prepared = 64;  // each holds an interpreter, a uid and a directory
    if (pool.size && (*pool.size < 0 || *pool.size > most_prepared))
      return fail_with(error_kind::invalid_argument,
                     fmt::format("config {}: pool.size must be from 0 (off) to {}", path, most_prepared));
    if (pool.max_age_seconds && !(*pool.max_age_seconds > 0 && *pool.max_age_seconds <= 86400))
      return fail_with(error_kind::invalid_argument,
                     fmt::format("config {}: pool.max_age_seconds must be more than 0 and at most a day", path));
    if (pool.size) base.pool.size = static_cast<std::size_t>(*pool.size);
    if (pool.max_age_seconds) base.pool.max_age_seconds = *pool.max_age_seconds;
  }
    if (base.run_as_uid.value_or(1) <= 0 || base.run_as_gid.value_or(1) <= 0)
    return fail_with(error_kind::invalid_argument,
                   fmt::format("config {}: run_as_uid and run_as_gid must be positive (never root)", path));
  if (base.run_as_gid && !base.run_as_uid)
    return fail_with(error_kind::invalid_argument,
                   fmt::format("config {}: run_as_gid needs run_as_uid (a uid per execution takes its gid from "
                               "run_as_range)",
                               path));
  if (base.run_as_range.first <= 0 || base.run_as_range.count <= 0)
    return fail_with(error_kind::invalid_argument,
                   fmt::format("config {}: run_as_range.first and run_as_range.count must be positive", path));
  return base;
}

}  // namespace psych::cli
