#pragma once
// A sandbox_result and a description as one JSON object each, with the
// spec's names: what `psych run --json` and `psych describe --json` print
// and what a service would answer.
#include <string>

#include "psych/host/sandbox.hpp"
#include "psych/protocol/json.hpp"

namespace psych::host {

using protocol::write_json;

namespace detail {

template <class Writer>
void write_string(Writer& w, std::string_view key, std::string_view value) {
  w.Key(key.data(), static_cast<rapidjson::SizeType>(key.size()));
  write_json(w, std::string(value));
}

}  // namespace detail

inline std::string result_to_json(const sandbox_result& r) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("value");
  if (r.value) w.RawValue(r.value->text.data(), r.value->text.size(), rapidjson::kObjectType);
  else w.Null();
  w.Key("failure");
  if (r.failure) {
    w.StartObject();
    detail::write_string(w, "kind", name_of(r.failure->kind));
    detail::write_string(w, "message", r.failure->message);
    detail::write_string(w, "traceback", r.failure->traceback);
    w.Key("line");
    w.Int64(r.failure->line);
    w.EndObject();
  } else {
    w.Null();
  }
  detail::write_string(w, "stdout", r.stdout_preview);
  detail::write_string(w, "stderr", r.stderr_preview);
  w.Key("stdout_size");
  w.Uint64(r.stdout_size);
  w.Key("stderr_size");
  w.Uint64(r.stderr_size);
  w.Key("limit_hit");
  if (r.limit_hit) write_json(w, *r.limit_hit);
  else w.Null();
  w.Key("cancelled");
  w.Bool(r.cancelled);
  w.Key("duration_seconds");
  w.Double(r.duration_seconds);
  w.Key("isolation");
  if (r.isolation) write_json(w, *r.isolation);
  else w.Null();
  w.Key("guarantees");
  write_json(w, r.guarantees);
  w.Key("network_denied");
  w.Bool(r.network_denied);
  w.Key("artifacts");
  w.StartArray();
  for (const auto& a : r.artifacts) {
    w.StartObject();
    detail::write_string(w, "path", a.path);
    w.Key("size_bytes");
    w.Uint64(a.size_bytes);
    w.EndObject();
  }
  w.EndArray();
  w.Key("artifacts_omitted");
  w.Uint64(r.artifacts_omitted);
  w.Key("problems");
  write_json(w, r.problems);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

inline std::string description_to_json(const description& d, const std::vector<backend_info>& backends) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("backends");
  w.StartArray();
  for (const auto& b : backends) {
    w.StartObject();
    detail::write_string(w, "name", b.name);
    w.Key("isolation");
    write_json(w, b.isolation);
    w.Key("available");
    w.Bool(b.available);
    detail::write_string(w, "reason", b.reason);
    w.EndObject();
  }
  w.EndArray();
  w.Key("ready");
  w.Bool(d.ready);
  detail::write_string(w, "backend", d.backend);
  w.Key("isolation");
  write_json(w, d.isolation);
  w.Key("guarantees");
  write_json(w, d.guarantees);
  w.Key("mechanisms");
  write_json(w, d.mechanisms);
  w.Key("problems");
  write_json(w, d.problems);
  w.Key("limit_ceiling");
  write_json(w, d.limit_ceiling);
  w.Key("network");
  w.Bool(d.network);
  detail::write_string(w, "interpreter", d.interpreter);
  detail::write_string(w, "launcher", d.launcher);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace psych::host
