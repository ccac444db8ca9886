#include "a2a/task_wire.hpp"

#include <array>
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

void write_parts(json_writer& w, a2a_dialect dialect, const rapidjson::Value* parts) {
  w.StartArray();
  if (parts != nullptr && parts->IsArray())
    for (const auto& part : parts->GetArray()) write_part(w, dialect, part);
  w.EndArray();
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

answer_result malformed(std::string detail) {
  return boost::outcome_v2::failure(answer_error{answer_fault::malformed, std::move(detail)});
}

answer_result read_task(a2a_dialect dialect, const rapidjson::Value& task) {
  task_answer answer;
  answer.task_id = std::string(string_member(task, "id"));
  if (answer.task_id.empty()) return malformed("a Task without an id");
  const rapidjson::Value* status = member(task, "status");
  if (status == nullptr || !status->IsObject()) return malformed("a Task without a status");
  answer.state = task_state_of(string_member(*status, "state"));
  answer.status_text = status_text_of(dialect, status);
  rapidjson::StringBuffer buffer;
  json_writer w{buffer};
  w.StartObject();
  key(w, "task_id");
  text(w, answer.task_id);
  key(w, "state");
  text(w, name_of(answer.state));
  key(w, "artifacts");
  w.StartArray();
  const rapidjson::Value* artifacts = member(task, "artifacts");
  if (artifacts != nullptr && artifacts->IsArray())
    for (const auto& artifact : artifacts->GetArray()) {
      if (!artifact.IsObject()) continue;
      w.StartObject();
      if (const auto name = string_member(artifact, "name"); !name.empty()) key(w, "name"), text(w, name);
      key(w, "parts");
      write_parts(w, dialect, member(artifact, "parts"));
      w.EndObject();
    }
  w.EndArray();
  w.EndObject();
  answer.result_json.assign(buffer.GetString(), buffer.GetSize());
  return answer;
}

answer_result read_message(a2a_dialect dialect, const rapidjson::Value& message) {
  task_answer answer;
  answer.is_task = false;
  answer.state = a2a_task_state::completed;
  rapidjson::StringBuffer buffer;
  json_writer w{buffer};
  w.StartObject();
  key(w, "parts");
  write_parts(w, dialect, member(message, "parts"));
  w.EndObject();
  answer.result_json.assign(buffer.GetString(), buffer.GetSize());
  return answer;
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
                              std::string_view arguments_json, std::string_view message_id) {
  const bool v1 = dialect == a2a_dialect::v1_0;
  const std::string line = fmt::format("Run the skill {} with these arguments: {}", skill, arguments_json);
  return request(id, v1 ? "SendMessage" : "message/send", [&](json_writer& w) {
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

answer_result read_answer(a2a_dialect dialect, std::string_view body, std::int64_t id) {
  rapidjson::Document document;
  if (auto parsed = parse_peer_json(body, document); !parsed) return malformed(parsed.error().message());
  if (!document.IsObject() || string_member(document, "jsonrpc") != "2.0") return malformed("not a JSON-RPC 2.0 response");
  const rapidjson::Value* answered = member(document, "id");
  const rapidjson::Value* error = member(document, "error");
  // A parse error is answered with a null id: it is about this request all the same.
  const bool null_id_error = error != nullptr && (answered == nullptr || answered->IsNull());
  if (!null_id_error && (answered == nullptr || !answered->IsInt64() || answered->GetInt64() != id))
    return boost::outcome_v2::failure(answer_error{
        answer_fault::wrong_id,
        fmt::format("the answer is to request {}, not {}", answered ? protocol::detail::excerpt(json_of(*answered), 40) : "(none)", id)});
  if (error != nullptr) {
    if (!error->IsObject()) return malformed("a JSON-RPC error that is not an object");
    const rapidjson::Value* code = member(*error, "code");
    return boost::outcome_v2::failure(answer_error{answer_fault::rpc_error,
                                                   protocol::detail::excerpt(string_member(*error, "message"), max_status_text_bytes),
                                                   code && code->IsInt64() ? code->GetInt64() : 0});
  }
  const rapidjson::Value* result = member(document, "result");
  if (result == nullptr || !result->IsObject()) return malformed("a JSON-RPC response with neither a result object nor an error");
  if (dialect == a2a_dialect::v1_0) {
    if (const rapidjson::Value* task = member(*result, "task")) return read_task(dialect, *task);
    if (const rapidjson::Value* message = member(*result, "message")) return read_message(dialect, *message);
    return read_task(dialect, *result);  // GetTask and CancelTask answer the Task itself
  }
  if (string_member(*result, "kind") == "message") return read_message(dialect, *result);
  return read_task(dialect, *result);
}

}  // namespace psych::host
