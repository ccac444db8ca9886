#pragma once
// A deployment's sandbox settings as a JSON file (`psych run --config FILE`),
// so an operator can fix the interpreter, the limits, the allowlist and the
// run_as identities without recompiling. Every member is optional; a member
// psych does not know, at any depth, is an error (docs/cli.md).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <boost/hana/adapt_struct.hpp>

#include "psych/host/sandbox.hpp"

namespace psych::cli {

/// run_as_range in the file: each member optional, the library's default where absent.
struct uid_range_config {
  std::optional<std::int64_t> first;
  std::optional<std::int64_t> count;
  std::optional<std::string> lock_dir;
};

/// prepared_pool_options in the file (docs/pools.md); `psych serve` keeps the pool, `psych run`
/// runs one program and has no use for one.
struct pool_config {
  std::optional<std::int64_t> size;
  std::optional<double> max_age_seconds;
};

struct sandbox_config {
  std::optional<std::string> python_bin;
  /// local_sandbox_options::limit_ceiling: each member optional, an absent one unset (the
  /// backend's built-in ceiling).
  limit_caps limit_ceiling;
  std::vector<std::string> env_allowlist;
  /// The cap on network=allowlist (local_sandbox_options::allowed_hosts).
  std::optional<std::vector<std::string>> allowed_hosts;
  std::optional<bool> allow_same_uid;
  std::optional<std::string> launcher_path;
  std::optional<std::int64_t> run_as_uid;
  std::optional<std::int64_t> run_as_gid;
  std::optional<uid_range_config> run_as_range;
  std::optional<std::string> temp_root;
  std::optional<std::string> backend;
  std::optional<pool_config> pool;
};

/// Reads and validates a config file; errors are unreadable_file, the
/// codec's json_* / frame_* kinds (naming the member; frame_unknown_member for
/// one psych does not know), or invalid_limit.
result<local_sandbox_options> load_config(const std::string& path, local_sandbox_options base);

}  // namespace psych::cli

BOOST_HANA_ADAPT_STRUCT(psych::cli::uid_range_config, first, count, lock_dir);
BOOST_HANA_ADAPT_STRUCT(psych::cli::pool_config, size, max_age_seconds);
BOOST_HANA_ADAPT_STRUCT(psych::cli::sandbox_config, python_bin, limit_ceiling, env_allowlist, allowed_hosts,
                        allow_same_uid, launcher_path, run_as_uid, run_as_gid, run_as_range, temp_root, backend, pool);
