#include "a2a/task_wire.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <functional>
#include <utility>

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "a2a/peer_json.hpp"
#include "psych/protocol/json.hpp"

namespace psych::host {
namespace {

using json_writer = rapidjson::Writer<rapidjson::StringBuffer>;

void key(json_writer& w, std::string_view name) { w.Key(name.data(), static_cast<rapidjson::SizeType>(name.size())); }
void text(json_writer& w, std::string_view value) {
  w.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
}

std::string request(std::int64_t id, std::string_view method, const std::function<void(json_writer&)>& params) {
  rapidjson::StringBuffer buffer;
  json_writer w{buffer};
  w.StartObject();
  key(w, "jsonrpc");
  text(w, "2.0");
  key(w, "id");
  w.Int64(id);
  key(w, "method");
  text(w, method);
  key(w, "params");
  w.StartObject();
  params(w);
  w.EndObject();
  w.EndObject();
  return {buffer.GetString(), buffer.GetSize()};
}

std::string json_string(std::string_view value) {
  rapidjson::StringBuffer buffer;
  json_writer w{buffer};
  text(w, value);
  return {buffer.GetString(), buffer.GetSize()};
}

const rapidjson::Value* member(const rapidjson::Value& object, const char* name) {
  if (!object.IsObject()) return nullptr;
  const auto found = object.FindMember(name);
  return found == object.MemberEnd() ? nullptr : &found->value;
}

/// One part, as the result carries it: {"text"}, {"data"} or {"file": {name, mimeType, uri|bytes}}.
/// A part of a kind psych does not know is left out.
void write_part(json_writer& w, a2a_dialect dialect, const rapidjson::Value& part) {
  if (!part.IsObject()) return;
  const auto file = [&](std::string_view name, std::string_view mime, const char* where, std::string_view what) {
    w.StartObject();
    key(w, "file");
    w.StartObject();
    if (!name.empty()) key(w, "name"), text(w, name);
    if (!mime.empty()) key(w, "mimeType"), text(w, mime);
    key(w, where);
    text(w, what);
    w.EndObject();
    w.EndObject();
  };
  const rapidjson::Value* value = nullptr;
  if (dialect == a2a_dialect::v0_3) {
    const auto kind = string_member(part, "kind");
    if (kind == "text" && (value = member(part, "text")) && value->IsString()) {
      w.StartObject(), key(w, "text"), text(w, string_member(part, "text")), w.EndObject();
    } else if (kind == "data" && (value = member(part, "data"))) {
      w.StartObject(), key(w, "data"), value->Accept(w), w.EndObject();
    } else if (kind == "file" && (value = member(part, "file")) && value->IsObject()) {
      const auto uri = string_member(*value, "uri");
      if (!uri.empty()) file(string_member(*value, "name"), string_member(*value, "mimeType"), "uri", uri);
      else file(string_member(*value, "name"), string_member(*value, "mimeType"), "bytes", string_member(*value, "bytes"));
    }
    return;
  }
  if ((value = member(part, "text")) && value->IsString()) {
    w.StartObject(), key(w, "text"), text(w, string_member(part, "text")), w.EndObject();
  } else if ((value = member(part, "data"))) {
    w.StartObject(), key(w, "data"), value->Accept(w), w.EndObject();
  } else if (!string_member(part, "url").empty()) {
    file(string_member(part, "filename"), string_member(part, "mediaType"), "uri", string_member(part, "url"));
  } else if ((value = member(part, "raw")) && value->IsString()) {
    file(string_member(part, "filename"), string_member(part, "mediaType"), "bytes", string_member(part, "raw"));
  }
}

/// A part as the result carries it, as JSON text; empty for a part of a kind psych does not know.
std::string part_json(a2a_dialect dialect, const rapidjson::Value& part) {
  rapidjson::StringBuffer buffer;
  json_writer w{buffer};
  write_part(w, dialect, part);
  return {buffer.GetString(), buffer.GetSize()};
}

/// The parts of a message, as the result carries them.
std::string parts_result(a2a_dialect dialect, const rapidjson::Value* parts) {
  std::string json = R"({"parts":[)";
  bool first = true;
  if (parts != nullptr && parts->IsArray())
    for (const auto& part : parts->GetArray()) {
      auto one = part_json(dialect, part);
      if (one.empty()) continue;
      if (!first) json += ',';
      json += one;
      first = false;
    }
  return json + "]}";
}

/// The text parts of a status message, joined with newlines and cut at max_status_text_bytes.
std::string status_text_of(a2a_dialect dialect, const rapidjson::Value* status) {
  std::string joined;
  const rapidjson::Value* message = status ? member(*status, "message") : nullptr;
  const rapidjson::Value* parts = message ? member(*message, "parts") : nullptr;
  if (parts == nullptr || !parts->IsArray()) return joined;
  for (const auto& part : parts->GetArray()) {
    if (dialect == a2a_dialect::v0_3 && string_member(part, "kind") != "text") continue;
    const auto piece = string_member(part, "text");
    if (piece.empty()) continue;
    if (!joined.empty()) joined += '\n';
    joined += piece;
    if (joined.size() > max_status_text_bytes) break;
  }
  if (joined.size() > max_status_text_bytes) joined = protocol::detail::excerpt(joined, max_status_text_bytes);
  return joined;
}

answer_error fault(answer_fault kind, std::string detail) { return {kind, std::move(detail)}; }

answer_result malformed(std::string detail) { return boost::outcome_v2::failure(fault(answer_fault::malformed, std::move(detail))); }

/// A status object into the snapshot: its state and what its message says.
bool take_status(task_snapshot& task, a2a_dialect dialect, const rapidjson::Value* status) {
  if (status == nullptr || !status->IsObject()) return false;
  task.state = task_state_of(string_member(*status, "state"));
  task.status_text = status_text_of(dialect, status);
  return true;
}

/// An artifact into the snapshot: a new one, one that replaces the artifact of the same id, or
/// (append) more parts of it. False when the parts held would pass `max_bytes`.
bool take_artifact(task_snapshot& task, a2a_dialect dialect, const rapidjson::Value& artifact, bool append,
                   std::size_t max_bytes) {
  if (!artifact.IsObject()) return true;
  const auto id = string_member(artifact, "artifactId");
  auto held = std::ranges::find_if(task.artifacts, [&](const task_artifact& a) { return !id.empty() && a.id == id; });
  if (held == task.artifacts.end()) held = task.artifacts.insert(task.artifacts.end(), task_artifact{std::string(id), {}, {}});
  if (const auto name = string_member(artifact, "name"); !name.empty()) held->name = std::string(name);
  if (!append) {
    for (const auto& part : held->parts) task.part_bytes -= part.size();
    held->parts.clear();
  }
  const rapidjson::Value* parts = member(artifact, "parts");
  if (parts == nullptr || !parts->IsArray()) return true;
  for (const auto& part : parts->GetArray()) {
    auto one = part_json(dialect, part);
    if (one.empty()) continue;
    task.part_bytes += one.size();
    if (task.part_bytes > max_bytes) return false;
    held->parts.push_back(std::move(one));
  }
  return true;
}

/// A whole Task (SendMessage's, GetTask's, the first event of a stream) as a snapshot.
boost::outcome_v2::basic_result<task_snapshot, answer_error, boost::outcome_v2::policy::terminate> snapshot_of(
    a2a_dialect dialect, const rapidjson::Value& json, std::size_t max_bytes) {
  task_snapshot task;
  task.id = std::string(string_member(json, "id"));
  if (task.id.empty()) return boost::outcome_v2::failure(fault(answer_fault::malformed, "a Task without an id"));
  if (!take_status(task, dialect, member(json, "status")))
    return boost::outcome_v2::failure(fault(answer_fault::malformed, "a Task without a status"));
  const rapidjson::Value* artifacts = member(json, "artifacts");
  if (artifacts != nullptr && artifacts->IsArray())
    for (const auto& artifact : artifacts->GetArray())
      if (!take_artifact(task, dialect, artifact, false, max_bytes))
        return boost::outcome_v2::failure(fault(answer_fault::too_large, "the task's artifacts are over the result's bound"));
  return task;
}

answer_result read_task(a2a_dialect dialect, const rapidjson::Value& json) {
  auto task = snapshot_of(dialect, json, std::numeric_limits<std::size_t>::max());
  if (!task) return boost::outcome_v2::failure(std::move(task).error());
  return answer_of(task.value());
}

answer_result read_message(a2a_dialect dialect, const rapidjson::Value& message) {
  return task_answer{.is_task = false, .state = a2a_task_state::completed, .result_json = parts_result(dialect, member(message, "parts"))};
}

/// The JSON-RPC envelope of the answer to request `id`: its `result` object, or what was wrong.
boost::outcome_v2::basic_result<const rapidjson::Value*, answer_error, boost::outcome_v2::policy::terminate> result_of(
    const rapidjson::Document& document, std::int64_t id) {
  using boost::outcome_v2::failure;
  if (!document.IsObject() || string_member(document, "jsonrpc") != "2.0")
    return failure(fault(answer_fault::malformed, "not a JSON-RPC 2.0 response"));
  const rapidjson::Value* answered = member(document, "id");
  const rapidjson::Value* error = member(document, "error");
  // A parse error is answered with a null id: it is about this request all the same.
  const bool null_id_error = error != nullptr && (answered == nullptr || answered->IsNull());
  if (!null_id_error && (answered == nullptr || !answered->IsInt64() || answered->GetInt64() != id))
    return failure(fault(answer_fault::wrong_id,
                         fmt::format("the answer is to request {}, not {}",
                                     answered ? protocol::detail::excerpt(json_of(*answered), 40) : "(none)", id)));
  if (error != nullptr) {
    if (!error->IsObject()) return failure(fault(answer_fault::malformed, "a JSON-RPC error that is not an object"));
    const rapidjson::Value* code = member(*error, "code");
    return failure(answer_error{answer_fault::rpc_error,
                                protocol::detail::excerpt(string_member(*error, "message"), max_status_text_bytes),
                                code && code->IsInt64() ? code->GetInt64() : 0});
  }
  const rapidjson::Value* result = member(document, "result");
  if (result == nullptr || !result->IsObject())
    return failure(fault(answer_fault::malformed, "a JSON-RPC response with neither a result object nor an error"));
  return result;
}

}  // namespace

a2a_task_state task_state_of(std::string_view spelling) {
  // 1.0 spells TASK_STATE_INPUT_REQUIRED, 0.3 input-required.
  constexpr std::array<std::pair<std::string_view, std::string_view>, 8> spellings{{
      {"TASK_STATE_SUBMITTED", "submitted"},
      {"TASK_STATE_WORKING", "working"},
      {"TASK_STATE_COMPLETED", "completed"},
      {"TASK_STATE_FAILED", "failed"},
      {"TASK_STATE_CANCELED", "canceled"},
      {"TASK_STATE_REJECTED", "rejected"},
      {"TASK_STATE_INPUT_REQUIRED", "input-required"},
      {"TASK_STATE_AUTH_REQUIRED", "auth-required"},
  }};
  for (std::size_t i = 0; i < spellings.size(); ++i)
    if (spelling == spellings[i].first || spelling == spellings[i].second) return static_cast<a2a_task_state>(i);
  return a2a_task_state::unknown;
}

bool ends_the_call(a2a_task_state state) noexcept {
  switch (state) {
    case a2a_task_state::submitted:
    case a2a_task_state::working:
    case a2a_task_state::unknown: return false;
    case a2a_task_state::completed:
    case a2a_task_state::failed:
    case a2a_task_state::canceled:
    case a2a_task_state::rejected:
    case a2a_task_state::input_required:
    case a2a_task_state::auth_required: return true;
  }
  return false;
}

std::string send_message_body(a2a_dialect dialect, std::int64_t id, std::string_view skill,
                              std::string_view arguments_json, std::string_view message_id, bool stream) {
  const bool v1 = dialect == a2a_dialect::v1_0;
  const std::string line = fmt::format("Run the skill {} with these arguments: {}", skill, arguments_json);
  const auto method = stream ? (v1 ? "SendStreamingMessage" : "message/stream") : (v1 ? "SendMessage" : "message/send");
  return request(id, method, [&](json_writer& w) {
    key(w, "message");
    w.StartObject();
    if (!v1) key(w, "kind"), text(w, "message");
    key(w, "messageId");
    text(w, message_id);
    key(w, "role");
    text(w, v1 ? "ROLE_USER" : "user");
    key(w, "parts");
    w.StartArray();
    w.StartObject();
    if (!v1) key(w, "kind"), text(w, "data");
    key(w, "data");
    w.RawValue(arguments_json.data(), arguments_json.size(), rapidjson::kObjectType);
    w.EndObject();
    w.StartObject();
    if (!v1) key(w, "kind"), text(w, "text");
    key(w, "text");
    text(w, line);
    w.EndObject();
    w.EndArray();
    key(w, "metadata");
    w.StartObject();
    key(w, "skill");
    text(w, skill);
    w.EndObject();
    w.EndObject();
    if (stream) return;  // a stream follows the task itself
    key(w, "configuration");
    w.StartObject();
    if (v1) key(w, "returnImmediately"), w.Bool(true);
    else key(w, "blocking"), w.Bool(false);
    w.EndObject();
  });
}

std::string get_task_body(a2a_dialect dialect, std::int64_t id, std::string_view task_id) {
  return request(id, dialect == a2a_dialect::v1_0 ? "GetTask" : "tasks/get", [&](json_writer& w) {
    key(w, "id");
    text(w, task_id);
    key(w, "historyLength");
    w.Int(0);
  });
}

std::string cancel_task_body(a2a_dialect dialect, std::int64_t id, std::string_view task_id) {
  return request(id, dialect == a2a_dialect::v1_0 ? "CancelTask" : "tasks/cancel", [&](json_writer& w) {
    key(w, "id");
    text(w, task_id);
  });
}

task_answer answer_of(const task_snapshot& task) {
  std::string json = R"({"task_id":)";
  json += json_string(task.id);
  json += R"(,"state":")";
  json += name_of(task.state);
  json += R"(","artifacts":[)";
  for (std::size_t i = 0; i < task.artifacts.size(); ++i) {
    const task_artifact& artifact = task.artifacts[i];
    if (i != 0) json += ',';
    json += '{';
    if (!artifact.name.empty()) json += R"("name":)" + json_string(artifact.name) + ',';
    json += R"("parts":[)";
    for (std::size_t j = 0; j < artifact.parts.size(); ++j) json += (j ? "," : "") + artifact.parts[j];
    json += "]}";
  }
  json += "]}";
  return task_answer{.is_task = true, .task_id = task.id, .state = task.state, .status_text = task.status_text,
                     .result_json = std::move(json)};
}

answer_result read_answer(a2a_dialect dialect, std::string_view body, std::int64_t id) {
  rapidjson::Document document;
  if (auto parsed = parse_peer_json(body, document); !parsed) return malformed(parsed.error().message());
  auto envelope = result_of(document, id);
  if (!envelope) return boost::outcome_v2::failure(std::move(envelope).error());
  const rapidjson::Value& result = *envelope.value();
  if (dialect == a2a_dialect::v1_0) {
    if (const rapidjson::Value* task = member(result, "task")) return read_task(dialect, *task);
    if (const rapidjson::Value* message = member(result, "message")) return read_message(dialect, *message);
    return read_task(dialect, result);  // GetTask and CancelTask answer the Task itself
  }
  if (string_member(result, "kind") == "message") return read_message(dialect, result);
  return read_task(dialect, result);
}

task_stream::task_stream(a2a_dialect dialect, std::int64_t id, std::size_t max_bytes)
    : dialect_(dialect), id_(id), max_bytes_(max_bytes) {}

stream_result task_stream::take(std::string_view data) {
  using boost::outcome_v2::failure;
  rapidjson::Document document;
  if (auto parsed = parse_peer_json(data, document); !parsed) return failure(fault(answer_fault::malformed, parsed.error().message()));
  auto envelope = result_of(document, id_);
  if (!envelope) return failure(std::move(envelope).error());
  const rapidjson::Value& result = *envelope.value();
  const bool v1 = dialect_ == a2a_dialect::v1_0;
  const auto kind = string_member(result, "kind");  // 0.3's mark; 1.0 wraps the event instead
  const rapidjson::Value* task = v1 ? member(result, "task") : kind == "task" ? &result : nullptr;
  const rapidjson::Value* message = v1 ? member(result, "message") : kind == "message" ? &result : nullptr;
  const rapidjson::Value* status = v1 ? member(result, "statusUpdate") : kind == "status-update" ? &result : nullptr;
  const rapidjson::Value* artifact = v1 ? member(result, "artifactUpdate") : kind == "artifact-update" ? &result : nullptr;
  if (task != nullptr) {
    auto snapshot = snapshot_of(dialect_, *task, max_bytes_);
    if (!snapshot) return failure(std::move(snapshot).error());
    task_ = std::move(snapshot).value();
    return boost::outcome_v2::success();
  }
  if (message != nullptr) {
    message_json_ = parts_result(dialect_, member(*message, "parts"));
    return boost::outcome_v2::success();
  }
  const rapidjson::Value* update = status ? status : artifact;
  if (update == nullptr) return failure(fault(answer_fault::malformed, "an event that is no Task, Message or update"));
  if (task_.id.empty()) return failure(fault(answer_fault::malformed, "an update before the Task it updates"));
  if (string_member(*update, "taskId") != task_.id) return failure(fault(answer_fault::malformed, "an update of another task"));
  if (status != nullptr) {
    if (!take_status(task_, dialect_, member(*status, "status")))
      return failure(fault(answer_fault::malformed, "a status update without a status"));
    return boost::outcome_v2::success();
  }
  const rapidjson::Value* append = member(*artifact, "append");
  const rapidjson::Value* body = member(*artifact, "artifact");
  if (body == nullptr) return failure(fault(answer_fault::malformed, "an artifact update without an artifact"));
  if (!take_artifact(task_, dialect_, *body, append != nullptr && append->IsTrue(), max_bytes_))
    return failure(fault(answer_fault::too_large, "the task's artifacts are over the result's bound"));
  return boost::outcome_v2::success();
}

bool task_stream::ended() const noexcept { return message_json_.has_value() || ends_the_call(task_.state); }

task_answer task_stream::answer() const {
  if (message_json_) return task_answer{.is_task = false, .state = a2a_task_state::completed, .result_json = *message_json_};
  return answer_of(task_);
}

}  // namespace psych::host
