#pragma once
// The remote protocol, versions 1 and 2 (docs/remote-protocol.md): what remote_sandbox and `psych serve`
// say to each other over HTTP, as plain structs. The contract codec's generic field walk encodes
// and decodes every one, so the JSON of a frame is exactly its members.
//
//   GET  /v1/describe                  -> the service's description (result_json.hpp's names)
//   POST /v1/executions/{id}           execution_request -> NDJSON: accepted, then call/cancel_call
//                                      as the program makes them, (version 2) live_output while it
//                                      runs, output chunks, done; or a single error before anything ran
//   POST /v1/executions/{id}/results   NDJSON of result frames (frames.hpp), the client's answers
//   POST /v1/executions/{id}/cancel    ends the execution; its stream then carries `done`
//
// The id is the client's (so a load balancer can send every route of one execution to one
// replica); every request carries `Authorization: Bearer <token>`.
#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/hana/adapt_struct.hpp>

#include "psych/host/live_output.hpp"
#include "psych/host/result_json.hpp"
#include "psych/open_enum.hpp"
#include "psych/protocol/frames.hpp"
#include "psych/terms.hpp"

namespace psych::remote {

/// What a client asks for in its request's `version`, and the service echoes in `accepted`. Version 2
/// is version 1 and `live_output` frames: a client asks for it when it has a sink for them. A
/// service serves both; a version-1 service refuses version 2 with `bad_request` before anything
/// ran, and the client asks again in version 1 (docs/remote-protocol.md, "Versions").
inline constexpr std::string_view protocol_version = "psych-remote/1";
inline constexpr std::string_view protocol_version_live = "psych-remote/2";
/// The execution's stream and the results' body.
inline constexpr std::string_view ndjson_content_type = "application/x-ndjson";

/// An execution id that may stand in a URL path as it is: [A-Za-z0-9._-], 1 to 128 of them.
inline bool is_url_safe_id(std::string_view id) {
  return !id.empty() && id.size() <= 128 && std::ranges::all_of(id, [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == '.';
  });
}

/// The body of POST /v1/executions/{id}.
struct execution_request {
  static constexpr std::array<std::string_view, 3> required_members{"version", "program", "terms"};
  std::string version;
  std::string program;
  std::string filename = "<program>";
  execution_terms terms;
  /// What `run` offers the program (the client's gateway answers the calls).
  std::vector<protocol::binding_info> bindings;
  std::string tenant = "default";
};

// ---- the execution's stream, service -> client ----------------------------------------------

/// First frame: the terms are within what the service can meet and a slot is held. Nothing has run
/// before it; the program may run after it.
struct accepted_frame {
  static constexpr std::string_view type = "accepted";
  static constexpr std::array<std::string_view, 2> required_members{"version", "execution_id"};
  std::string version;
  std::string execution_id;
  std::string backend;  ///< the service's local backend, e.g. "linux-namespaces"
};

/// Captured bytes, in order, base64: stdout, stderr, or collected artifact number `index` of done.
struct output_frame {
  static constexpr std::string_view type = "output";
  static constexpr std::array<std::string_view, 2> required_members{"stream", "data"};
  std::string stream;  ///< "stdout", "stderr" or "artifact"
  std::uint64_t index = 0;
  std::string data;
};

/// Version 2: bytes of stdout or stderr while the program runs, base64. `offset` counts every byte
/// the program wrote to the stream: a gap before it is what the service skipped because the client
/// was behind (at most live_output_window_bytes wait for it there). Empty data at the stream's end
/// says its tail was skipped. The result's `output` frames still follow, as in version 1.
struct live_output_frame {
  static constexpr std::string_view type = "live_output";
  static constexpr std::array<std::string_view, 3> required_members{"stream", "offset", "data"};
  output_stream stream = output_stream::stdout_stream;
  std::uint64_t offset = 0;
  std::string data;
};

/// A collected artifact's name and size; its bytes are the `output` chunks with its index.
struct artifact_entry {
  std::string path;
  std::uint64_t size_bytes = 0;
};

/// What the service's backend produced, less the bytes (sent as `output` frames before this) and
/// less what only the client knows (attachments, binding meters, unavailable bindings).
struct execution_outcome {
  std::optional<json_text> value;
  std::optional<sandbox_failure> failure;
  std::uint64_t stdout_size = 0, stderr_size = 0;
  std::vector<artifact_entry> artifacts;
  std::uint64_t artifacts_omitted = 0;
  std::map<open_enum<omission_reason>, std::uint64_t> artifacts_omitted_by_reason;
  double duration_seconds = 0;
  std::optional<limit_name> limit_hit;
  bool cancelled = false;
  std::optional<isolation_level> isolation;
  guarantee_grades guarantees;
  bool network_denied = false;
  std::vector<std::string> problems;
  omittable<egress_report> egress;
};

/// The members execution_outcome carries of a sandbox_result, each named once for both directions
/// (the service fills an outcome from its backend's result, the client a result from the outcome):
/// f(&execution_outcome::m, &sandbox_result::m) for each. The bytes, the artifacts and what only the
/// client knows are not among them.
template <class F>
void for_each_carried_member(F&& f) {
  f(&execution_outcome::value, &sandbox_result::value);
  f(&execution_outcome::failure, &sandbox_result::failure);
  f(&execution_outcome::stdout_size, &sandbox_result::stdout_size);
  f(&execution_outcome::stderr_size, &sandbox_result::stderr_size);
  f(&execution_outcome::artifacts_omitted, &sandbox_result::artifacts_omitted);
  f(&execution_outcome::artifacts_omitted_by_reason, &sandbox_result::artifacts_omitted_by_reason);
  f(&execution_outcome::duration_seconds, &sandbox_result::duration_seconds);
  f(&execution_outcome::limit_hit, &sandbox_result::limit_hit);
  f(&execution_outcome::cancelled, &sandbox_result::cancelled);
  f(&execution_outcome::isolation, &sandbox_result::isolation);
  f(&execution_outcome::guarantees, &sandbox_result::guarantees);
  f(&execution_outcome::network_denied, &sandbox_result::network_denied);
  f(&execution_outcome::problems, &sandbox_result::problems);
  f(&execution_outcome::egress, &sandbox_result::egress);
}

/// The last frame of an execution that was accepted.
struct done_frame {
  static constexpr std::string_view type = "done";
  static constexpr std::array<std::string_view, 1> required_members{"outcome"};
  execution_outcome outcome;
};

/// The code of an `error` frame: why the service did not carry the execution.
enum class error_code {
  /// The service's backend cannot meet the terms; `refusal` says why (none: limits beyond the
  /// service's ceiling). Nothing ran.
  terms_unmet,
  /// The request was malformed, of another protocol version, or held invalid limits. Nothing ran.
  bad_request,
  /// Every execution slot and the queue are full. Nothing ran; the client may try again later.
  busy,
  /// The service is draining: the execution was refused, or dropped from its queue. Nothing ran.
  shutting_down,
  /// The service failed for a reason of its own; the message says which.
  internal,
  /// The client cancelled the execution while it was queued. Nothing ran.
  cancelled,
};

}  // namespace psych::remote

namespace psych {
PSYCH_ENUM_NAMES(remote::error_code, "terms_unmet", "bad_request", "busy", "shutting_down", "internal", "cancelled");
}

namespace psych::remote {

/// Why the service will not (or can no longer) carry the execution. Before `accepted`, nothing ran.
struct error_frame {
  static constexpr std::string_view type = "error";
  static constexpr std::array<std::string_view, 2> required_members{"code", "message"};
  /// A code this client does not have (a newer service's) is read, and reported with the message
  /// as a provider_error, as every code without a rule of its own here is.
  open_enum<error_code> code;
  std::string message;
  std::optional<refusal_reason> refusal;
};

}  // namespace psych::remote

BOOST_HANA_ADAPT_STRUCT(psych::execution_terms, isolation, limits, network, allowed_hosts, output, artifacts);
BOOST_HANA_ADAPT_STRUCT(psych::remote::execution_request, version, program, filename, terms, bindings, tenant);
BOOST_HANA_ADAPT_STRUCT(psych::remote::accepted_frame, version, execution_id, backend);
BOOST_HANA_ADAPT_STRUCT(psych::remote::output_frame, stream, index, data);
BOOST_HANA_ADAPT_STRUCT(psych::remote::live_output_frame, stream, offset, data);
BOOST_HANA_ADAPT_STRUCT(psych::remote::artifact_entry, path, size_bytes);
BOOST_HANA_ADAPT_STRUCT(psych::remote::execution_outcome, value, failure, stdout_size, stderr_size, artifacts,
                        artifacts_omitted, artifacts_omitted_by_reason, duration_seconds, limit_hit, cancelled,
                        isolation, guarantees, network_denied, problems, egress);
BOOST_HANA_ADAPT_STRUCT(psych::remote::done_frame, outcome);
BOOST_HANA_ADAPT_STRUCT(psych::remote::error_frame, code, message, refusal);
