#pragma once
// A sandbox_result and a description as JSON, with the spec's names: what
// `psych run --json` and `psych describe --json` print. The contract codec's
// generic field walk does the writing; this header only says which fields,
// under which names.
#include <string>
#include <vector>

#include <boost/hana/adapt_adt.hpp>
#include <boost/hana/adapt_struct.hpp>

#include "psych/host/sandbox.hpp"
#include "psych/protocol/json.hpp"

namespace psych::host {

/// What `psych describe --json` prints: every local backend, then the chosen one's probe.
struct describe_report {
  std::vector<backend_info> backends;
  description chosen;
};

/// What `psych run --json` prints when run_code would refuse: {"refused": {reason, message}}.
struct refusal_report {
  refusal refused;
};

inline std::string result_to_json(const sandbox_result& result) { return protocol::encode_json(result); }

inline std::string refusal_to_json(const refusal& refused) { return protocol::encode_json(refusal_report{refused}); }

inline std::string description_to_json(const description& chosen, const std::vector<backend_info>& backends) {
  return protocol::encode_json(describe_report{backends, chosen});
}

}  // namespace psych::host

BOOST_HANA_ADAPT_STRUCT(psych::sandbox_failure, kind, message, traceback, line);
BOOST_HANA_ADAPT_STRUCT(psych::artifact, path, size_bytes);
// The spec's names; the captured bytes (stdout_data, stderr_data) stay out of
// the model-facing JSON, the previews go in under "stdout" and "stderr".
BOOST_HANA_ADAPT_ADT(psych::sandbox_result,
                     (value, [](const psych::sandbox_result& r) { return r.value; }),
                     (failure, [](const psych::sandbox_result& r) { return r.failure; }),
                     (stdout, [](const psych::sandbox_result& r) { return r.stdout_preview; }),
                     (stderr, [](const psych::sandbox_result& r) { return r.stderr_preview; }),
                     (stdout_size, [](const psych::sandbox_result& r) { return r.stdout_size; }),
                     (stderr_size, [](const psych::sandbox_result& r) { return r.stderr_size; }),
                     (limit_hit, [](const psych::sandbox_result& r) { return r.limit_hit; }),
                     (cancelled, [](const psych::sandbox_result& r) { return r.cancelled; }),
                     (duration_seconds, [](const psych::sandbox_result& r) { return r.duration_seconds; }),
                     (isolation, [](const psych::sandbox_result& r) { return r.isolation; }),
                     (guarantees, [](const psych::sandbox_result& r) { return r.guarantees; }),
                     (network_denied, [](const psych::sandbox_result& r) { return r.network_denied; }),
                     (egress, [](const psych::sandbox_result& r) { return r.egress; }),
                     (artifacts, [](const psych::sandbox_result& r) { return r.artifacts; }),
                     (artifacts_omitted, [](const psych::sandbox_result& r) { return r.artifacts_omitted; }),
                     (artifacts_omitted_by_reason,
                      [](const psych::sandbox_result& r) { return r.artifacts_omitted_by_reason; }),
                     (attachments, [](const psych::sandbox_result& r) { return r.attachments; }),
                     (problems, [](const psych::sandbox_result& r) { return r.problems; }),
                     (bindings_spent, [](const psych::sandbox_result& r) { return r.bindings_spent; }),
                     (unavailable_bindings, [](const psych::sandbox_result& r) { return r.unavailable_bindings; }));
BOOST_HANA_ADAPT_STRUCT(psych::meter_readings, calls, transfer, produced, preserved);
BOOST_HANA_ADAPT_STRUCT(psych::result_attachment, name, handle, content_type, size_bytes, truncated, location,
                        bytes_let_go, preview);
BOOST_HANA_ADAPT_STRUCT(psych::backend_info, name, isolation, available, reason);
BOOST_HANA_ADAPT_STRUCT(psych::run_as_report, mode, first, count, free, held, stray, lock_dir);
BOOST_HANA_ADAPT_STRUCT(psych::description, ready, backend, isolation, guarantees, mechanisms, problems,
                        limit_ceiling, network, network_allowlist, allowed_hosts, interpreter, launcher,
                        run_as);
BOOST_HANA_ADAPT_STRUCT(psych::host::describe_report, backends, chosen);
BOOST_HANA_ADAPT_STRUCT(psych::refusal, reason, message);
BOOST_HANA_ADAPT_STRUCT(psych::host::refusal_report, refused);
