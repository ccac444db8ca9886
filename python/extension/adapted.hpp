#pragma once
// The option and report structs the Python face sends and reads as JSON, adapted for the codec
// here because only this module carries them as JSON. The remote backend's options are adapted
// without their token: a credential never travels as JSON (the Python side passes a callback).
// Only what the codec cannot carry as it is (std::chrono durations) is mirrored.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/hana/adapt_struct.hpp>

#include "psych/host/container_sandbox.hpp"
#include "psych/host/output_reader.hpp"
#include "psych/host/remote_protocol.hpp"
#include "psych/host/remote_sandbox.hpp"
#include "psych/host/result_json.hpp"
#include "psych/host/run_log.hpp"
#include "psych/host/runtime.hpp"
#include "psych/host/sandbox.hpp"

namespace psych::python {

/// One MCP server: a command (stdio) or a url (Streamable HTTP), as mcp_server_config has them,
/// with its durations in milliseconds (the codec carries no std::chrono).
struct mcp_server_entry {
  std::string name;
  std::vector<std::string> command;
  std::map<std::string, std::string> environment;
  std::string url;
  std::optional<std::string> ca_file;
  bool allow_insecure_http = false;
  std::uint64_t timeout_ms = 30000;
  std::optional<std::uint64_t> start_timeout_ms;
};

/// One A2A peer, as a2a_peer_config has it, durations in milliseconds and without its token.
struct a2a_peer_entry {
  std::string name;
  std::string url;
  std::optional<std::string> ca_file;
  bool allow_insecure_http = false;
  std::uint64_t timeout_ms = 60000;
  std::uint64_t start_timeout_ms = 10000;
};

}  // namespace psych::python

BOOST_HANA_ADAPT_STRUCT(psych::uid_range, first, count, lock_dir);
BOOST_HANA_ADAPT_STRUCT(psych::prepared_pool_options, size, max_age_seconds);
BOOST_HANA_ADAPT_STRUCT(psych::local_sandbox_options, isolation, python_bin, limit_ceiling, env_allowlist,
                        allowed_hosts, allow_same_uid, backend, launcher_path, run_as_uid, run_as_gid, run_as_range,
                        temp_root, pool, probe_at_open);
BOOST_HANA_ADAPT_STRUCT(psych::container_sandbox_options, runtime, image, container_python_bin, limit_ceiling,
                        env_allowlist, run_as_uid, run_as_gid, run_as_range, extra_run_args, launcher_path, temp_root,
                        probe_at_open);
BOOST_HANA_ADAPT_STRUCT(psych::backend_offer, ready, isolation, limit_ceiling, network, network_allowlist,
                        allowed_hosts, problems);
BOOST_HANA_ADAPT_STRUCT(psych::code_execution_grant, limits, allow_network, allowed_hosts, budget);
BOOST_HANA_ADAPT_STRUCT(psych::remote_sandbox_options, url, ca_file, allow_insecure_http, connect_timeout_seconds,
                        describe_ttl_seconds, describe_attempts, wall_clock_slack_seconds, cancel_grace_seconds);
BOOST_HANA_ADAPT_STRUCT(psych::python::mcp_server_entry, name, command, environment, url, ca_file, allow_insecure_http,
                        timeout_ms, start_timeout_ms);
BOOST_HANA_ADAPT_STRUCT(psych::python::a2a_peer_entry, name, url, ca_file, allow_insecure_http, timeout_ms,
                        start_timeout_ms);
BOOST_HANA_ADAPT_STRUCT(psych::output_request, offset, limit, pattern);
BOOST_HANA_ADAPT_STRUCT(psych::call_started, call_id, execution_id, tool, argument_bytes);
BOOST_HANA_ADAPT_STRUCT(psych::profile_status, profile, described);
