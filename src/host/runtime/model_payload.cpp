#include "psych/host/model_payload.hpp"

#include <algorithm>
#include <numeric>
#include <string_view>
#include <vector>

#include "psych/attachment.hpp"
#include "psych/grading.hpp"
#include "psych/protocol/json.hpp"

namespace psych::host {

namespace {

using protocol::json_writer;

constexpr std::string_view artifact_prefix = "artifact:";

/// How the model reads what a handle preserves (the read_tool_output tool's arguments).
constexpr std::string_view read_more = "read_tool_output {handle, offset, limit} reads lines; {handle, pattern} "
                                       "searches";

void key(json_writer& w, std::string_view name) { protocol::detail::write_string(w, name, /*as_key=*/true); }

/// Each item's attachment, in the result's order. An item the backend attached nothing for (a
/// result refused before anything started has no attachments) is described from the result's own
/// fields, with the default preview budget.
std::vector<result_attachment> items_of(const sandbox_result& r) {
  std::vector<result_attachment> items = r.attachments;
  const auto add = [&](std::string name, std::string type, std::string_view captured, std::uint64_t produced) {
    if (std::ranges::find(items, name, &result_attachment::name) != items.end()) return;
    items.push_back(describe_item(std::move(name), std::move(type), captured,
                                  std::max<std::uint64_t>(produced, captured.size()), output_policy{}));
  };
  add("stdout", "text/plain", r.stdout_data.empty() ? r.stdout_preview : r.stdout_data, r.stdout_size);
  add("stderr", "text/plain", r.stderr_data.empty() ? r.stderr_preview : r.stderr_data, r.stderr_size);
  if (r.value) add("value", "application/json", r.value->text, r.value->text.size());
  for (const auto& file : r.artifacts)
    add(std::string(artifact_prefix) + file.path, "application/octet-stream", file.data, file.size_bytes);
  return items;
}

bool whole(const result_attachment& item) { return item.location == attachment_location::inline_bytes; }

const result_attachment* named(const std::vector<result_attachment>& items, std::string_view name) {
  const auto found = std::ranges::find(items, name, &result_attachment::name);
  return found == items.end() ? nullptr : &*found;
}

void write_failure(json_writer& w, const sandbox_failure& failure) {
  key(w, "failure");
  w.StartObject();
  key(w, "kind");
  protocol::write_json(w, failure.kind);
  key(w, "message");
  protocol::write_json(w, failure.message);
  if (!failure.traceback.empty()) {
    key(w, "traceback");
    protocol::write_json(w, failure.traceback);
  }
  if (failure.line > 0) {
    key(w, "line");
    protocol::write_json(w, failure.line);
  }
  w.EndObject();
}

/// stdout, stderr, value and the artifacts that fit their previews, each once.
void write_whole_items(json_writer& w, const sandbox_result& r, const std::vector<result_attachment>& items) {
  if (const auto* value = named(items, "value"); value && whole(*value) && r.value) {
    key(w, "value");
    protocol::write_json(w, *r.value);
  }
  for (const std::string_view stream : {"stdout", "stderr"}) {
    const auto* item = named(items, stream);
    if (!item || !whole(*item) || item->preview.empty()) continue;
    key(w, stream);
    protocol::write_json(w, item->preview);
  }
  const auto whole_artifact = [](const result_attachment& item) {
    return item.name.starts_with(artifact_prefix) && whole(item);
  };
  if (std::ranges::none_of(items, whole_artifact)) return;
  key(w, "artifacts");
  w.StartObject();
  for (const auto& item : items) {
    if (!whole_artifact(item)) continue;
    key(w, std::string_view(item.name).substr(artifact_prefix.size()));
    protocol::write_json(w, item.preview);
  }
  w.EndObject();
}

/// The items too large to show whole: a preview each, and a handle where the bytes are preserved.
void write_partial_items(json_writer& w, const std::vector<result_attachment>& items) {
  if (std::ranges::all_of(items, whole)) return;
  bool handles = false;
  key(w, "partial");
  w.StartObject();
  for (const auto& item : items) {
    if (whole(item)) continue;
    key(w, item.name);
    w.StartObject();
    key(w, "preview");
    protocol::write_json(w, item.preview);
    key(w, "size_bytes");
    protocol::write_json(w, item.size_bytes);
    if (item.location == attachment_location::blob && !item.handle.empty()) {
      key(w, "handle");
      protocol::write_json(w, item.handle);
      handles = true;
    }
    w.EndObject();
  }
  w.EndObject();
  if (handles) {
    key(w, "read_more");
    protocol::write_json(w, std::string(read_more));
  }
}

void write_omitted(json_writer& w, const sandbox_result& r) {
  if (r.artifacts_omitted == 0 && r.artifacts_omitted_by_reason.empty()) return;
  auto by_reason = r.artifacts_omitted_by_reason;
  const auto counted = std::accumulate(by_reason.begin(), by_reason.end(), std::uint64_t{0},
                                       [](std::uint64_t sum, const auto& entry) { return sum + entry.second; });
  if (counted < r.artifacts_omitted)
    by_reason[open_enum<omission_reason>::from_spelling("other")] += r.artifacts_omitted - counted;
  key(w, "artifacts_omitted");
  protocol::write_json(w, by_reason);
}

void write_grades(json_writer& w, const sandbox_result& r, const guarantee_grades& promised) {
  if (!r.isolation) return;  // nothing reached a level: the failure says why, not ten grades
  const auto below = below_promise(r.guarantees, promised);
  if (below.empty()) return;
  key(w, "guarantees_below_asked");
  w.StartObject();
  for (const auto& shortfall : below) {
    key(w, shortfall.guarantee);
    protocol::write_json(w, shortfall.got);
  }
  w.EndObject();
}

void write_strings(json_writer& w, std::string_view name, const std::vector<std::string>& strings) {
  if (strings.empty()) return;
  key(w, name);
  protocol::write_json(w, strings);
}

}  // namespace

std::string model_payload(const sandbox_result& r, const guarantee_grades& promised) {
  rapidjson::StringBuffer buffer;
  json_writer w{buffer};
  w.StartObject();
  if (r.failure) write_failure(w, *r.failure);
  if (r.limit_hit) {
    key(w, "limit_hit");
    protocol::write_json(w, *r.limit_hit);
  }
  if (r.cancelled) {
    key(w, "cancelled");
    w.Bool(true);
  }
  const auto items = items_of(r);
  write_whole_items(w, r, items);
  write_partial_items(w, items);
  write_omitted(w, r);
  write_grades(w, r, promised);
  write_strings(w, "problems", r.problems);
  write_strings(w, "unavailable_bindings", r.unavailable_bindings);
  w.EndObject();
  return {buffer.GetString(), buffer.GetSize()};
}

}  // namespace psych::host
