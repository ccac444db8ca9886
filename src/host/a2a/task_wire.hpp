#pragma once
// The JSON-RPC messages of an A2A call in either dialect (agent_card.hpp): the three requests psych
// sends and the one reading of what comes back, a Task or a Message, into a task_answer. Pure: no
// I/O, so every malformed answer is tested without a peer (tests/a2a/test_task_wire.cpp).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/outcome/basic_result.hpp>
#include <boost/outcome/policy/terminate.hpp>

#include "a2a/agent_card.hpp"
#include "psych/names.hpp"

namespace psych::host {

/// A task's state, whichever dialect spelt it.
enum class a2a_task_state {
  submitted,
  working,
  completed,
  failed,
  canceled,
  rejected,
  input_required,
  auth_required,
  /// A spelling psych does not know (or none): never taken for a terminal state.
  unknown,
};
}  // namespace psych::host

namespace psych {
PSYCH_ENUM_NAMES(host::a2a_task_state, "submitted", "working", "completed", "failed", "canceled", "rejected",
                 "input_required", "auth_required", "unknown");
}  // namespace psych

namespace psych::host {

a2a_task_state task_state_of(std::string_view spelling);

/// Terminal: completed, failed, canceled, rejected. Interrupted (input_required, auth_required)
/// also ends a call: nobody in a program can answer.
[[nodiscard]] bool ends_the_call(a2a_task_state state) noexcept;

/// The body of a SendMessage: one user message whose parts are a data part (the arguments object)
/// and a text part naming the skill; the skill id in the message's metadata. Not `stream`: the
/// task returned at once (returnImmediately / blocking false), to be followed with GetTask;
/// `stream`: SendStreamingMessage (0.3: message/stream). `arguments_json` must be a JSON object
/// (the gateway checked).
std::string send_message_body(a2a_dialect dialect, std::int64_t id, std::string_view skill,
                              std::string_view arguments_json, std::string_view message_id, bool stream = false);
/// GetTask, without history (historyLength 0): the answer carries the artifacts, not the request.
std::string get_task_body(a2a_dialect dialect, std::int64_t id, std::string_view task_id);
std::string cancel_task_body(a2a_dialect dialect, std::int64_t id, std::string_view task_id);

/// What one answer said.
struct task_answer {
  /// False: the answer was a Message, which ends the call (result_json is its parts).
  bool is_task = true;
  std::string task_id;
  a2a_task_state state = a2a_task_state::unknown;
  /// The text parts of the status message, joined (at most max_status_text_bytes): why a task
  /// failed or what input it wants. Peer text: redact before quoting.
  std::string status_text;
  /// The call's result (docs/a2a.md, "The result").
  std::string result_json;
};

inline constexpr std::size_t max_status_text_bytes = 512;

/// Why an answer could not be read.
enum class answer_fault {
  /// Not JSON-RPC 2.0, or a result that is neither a Task nor a Message.
  malformed,
  /// A JSON-RPC response to another request: another id, or none.
  wrong_id,
  /// A JSON-RPC error object: `code` and the message in the detail.
  rpc_error,
  /// A stream's artifacts grew past the result's bound.
  too_large,
};
}  // namespace psych::host

namespace psych {
PSYCH_ENUM_NAMES(host::answer_fault, "malformed", "wrong_id", "rpc_error", "too_large");
}  // namespace psych

namespace psych::host {

struct answer_error {
  answer_fault fault;
  std::string detail;  ///< may hold peer text: redact before quoting
  std::int64_t code = 0;
};

using answer_result = boost::outcome_v2::basic_result<task_answer, answer_error, boost::outcome_v2::policy::terminate>;

/// Reads the response to request `id`: SendMessage's (a Task or a Message; 1.0 wraps it as
/// {"task": ...} or {"message": ...}, 0.3 marks it with "kind") or GetTask's and CancelTask's (a Task).
answer_result read_answer(a2a_dialect dialect, std::string_view body, std::int64_t id);

/// One artifact, its parts already as the result carries them.
struct task_artifact {
  std::string id;
  std::string name;
  std::vector<std::string> parts;
};

/// What is known of a task: from a Task, and then from the updates a stream sends.
struct task_snapshot {
  std::string id;
  a2a_task_state state = a2a_task_state::unknown;
  std::string status_text;
  std::vector<task_artifact> artifacts;
  std::size_t part_bytes = 0;  ///< of every part held
};

/// The snapshot as an answer: its result_json the call's result.
task_answer answer_of(const task_snapshot& task);

using stream_result = boost::outcome_v2::basic_result<void, answer_error, boost::outcome_v2::policy::terminate>;

/// The events of a SendStreamingMessage (0.3: message/stream), each the data of one SSE event: a
/// JSON-RPC response to request `id` carrying a Task, a Message, a status update or an artifact
/// update (1.0 wraps each as {"task"}, {"message"}, {"statusUpdate"}, {"artifactUpdate"}; 0.3
/// marks it with "kind"). Artifacts are kept as they arrive (replaced, or appended to), at most
/// `max_bytes` of parts in all.
class task_stream {
 public:
  task_stream(a2a_dialect dialect, std::int64_t id, std::size_t max_bytes);

  /// One event. After a failure, or once ended(), take no more.
  stream_result take(std::string_view data);
  /// A Message came, or the task is in a state that ends the call.
  [[nodiscard]] bool ended() const noexcept;
  /// The task's id once its Task came, else empty.
  [[nodiscard]] const std::string& task_id() const noexcept { return task_.id; }
  [[nodiscard]] task_answer answer() const;

 private:
  a2a_dialect dialect_;
  std::int64_t id_;
  std::size_t max_bytes_;
  task_snapshot task_;
  std::optional<std::string> message_json_;
};

}  // namespace psych::host
