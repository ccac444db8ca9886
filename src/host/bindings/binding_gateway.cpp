#include "bindings/binding_gateway.hpp"

#include <algorithm>
#include <functional>
#include <optional>
#include <ranges>

#include <boost/hana/adapt_struct.hpp>
#include <fmt/format.h>

#include "psych/builtins.hpp"
#include "psych/host/read_tool_output.hpp"
#include "psych/protocol/json.hpp"

#include <rapidjson/document.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

namespace psych::host::builtin_args {
/// list_tools' arguments: a window of the sorted bindings.
struct list_tools {
  std::optional<std::int64_t> offset;
  std::optional<std::int64_t> limit;
};
/// get_tool_info's: one offered name.
struct get_tool_info {
  std::string name;
};
/// What list_tools answers per tool; the schema stays with get_tool_info.
struct listed_tool {
  std::string name;
  std::string description;
  bool deferred = false;
};
struct tool_list {
  std::vector<listed_tool> tools;
  std::int64_t total = 0;
  std::optional<std::int64_t> next_offset;
};
struct read_tool_output {
  std::string handle;
  std::optional<std::uint64_t> offset;
  std::optional<std::uint64_t> limit;
  std::optional<std::string> pattern;
};
struct tool_info {
  std::string name;
  std::string description;
  bool deferred = false;
  json_text input_schema;
};
}  // namespace psych::host::builtin_args

BOOST_HANA_ADAPT_STRUCT(psych::host::builtin_args::list_tools, offset, limit);
BOOST_HANA_ADAPT_STRUCT(psych::host::builtin_args::get_tool_info, name);
BOOST_HANA_ADAPT_STRUCT(psych::host::builtin_args::listed_tool, name, description, deferred);
BOOST_HANA_ADAPT_STRUCT(psych::host::builtin_args::tool_list, tools, total, next_offset);
BOOST_HANA_ADAPT_STRUCT(psych::host::builtin_args::tool_info, name, description, deferred, input_schema);
BOOST_HANA_ADAPT_STRUCT(psych::host::builtin_args::read_tool_output, handle, offset, limit, pattern);

namespace psych::host {

namespace {

/// list_tools is bounded: a window of at most this many tools, each description cut to a line's worth.
constexpr std::int64_t list_window_max = 100;
constexpr std::size_t listed_description_max = 300;

protocol::result_frame refused(std::int64_t id, std::string_view tool, tool_error_kind kind, std::string message) {
  return {.id = id, .ok = false, .value = std::nullopt,
          .error = protocol::call_error{.kind = kind, .tool = std::string(tool), .message = std::move(message)}};
}

protocol::result_frame refused(const protocol::call_frame& call, tool_error_kind kind, std::string message) {
  return refused(call.id, call.tool, kind, std::move(message));
}

std::string budget_message(const exhaustion& out, const binding_budget& budget, const meter_readings& execution,
                           const meter_readings& run) {
  return exhaustion_message(out, budget, execution, run);
}

/// A description cut at a character boundary, so a listing stays bounded whatever a server wrote.
std::string shortened(const std::string& text) {
  if (text.size() <= listed_description_max) return text;
  std::size_t cut = listed_description_max;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "...";
}

}  // namespace

binding_gateway::binding_gateway(gateway_setup setup) : setup_(std::move(setup)) {
  auto& offered = setup_.offered;
  if (!setup_.invoker && !setup_.relayed) offered.clear();
  std::sort(offered.begin(), offered.end(), [](const binding& a, const binding& b) { return a.name < b.name; });
  offered.erase(std::unique(offered.begin(), offered.end(),
                            [](const binding& a, const binding& b) { return a.name == b.name; }),
                offered.end());
}

const binding* binding_gateway::find(std::string_view name) const {
  const auto& offered = setup_.offered;
  const auto found = std::ranges::lower_bound(offered, name, std::less<>{},
                                              [](const binding& b) { return std::string_view(b.name); });
  return found != offered.end() && found->name == name ? &*found : nullptr;
}

meter_readings binding_gateway::run_spent() const noexcept {
  if (setup_.run.live) return setup_.run.live->read();
  auto total = setup_.run.spent_before;
  total += spent_;
  return total;
}

void binding_gateway::spend(const meter_readings& more) {
  spent_ += more;
  if (setup_.run.live) setup_.run.live->add(more);
}

bool binding_gateway::journal(const run_log_record& record) {
  if (!setup_.run.log) return true;
  // Never waited for: a started record is made durable by proceed(), before its tool is invoked,
  // and a finished one a crash may lose (its call then reads UNKNOWN) until a later sync covers it.
  auto appended = setup_.run.log->append_deferred(record);
  if (!appended) problems_.push_back("run log: " + appended.error().message());
  return appended.has_value();
}

bool binding_gateway::sync_journal() {
  if (!setup_.run.log) return true;
  auto synced = setup_.run.log->sync();
  if (!synced) problems_.push_back("run log: " + synced.error().message());
  return synced.has_value();
}

bool binding_gateway::callable_builtin(std::string_view tool) const {
  return builtin_named(tool) && setup_.invoker && (tool != "read_tool_output" || setup_.blobs);
}

binding_gateway::admission binding_gateway::admit(const protocol::call_frame& call) {
  if (const auto reason = exclusion_reason(call.tool))
    return refused(call, tool_error_kind::excluded_builtin, std::string(*reason));
  if (!callable_builtin(call.tool) && !find(call.tool)) {
    if (std::ranges::find(setup_.unavailable, call.tool) != setup_.unavailable.end())
      return refused(call, tool_error_kind::unavailable_binding,
                     fmt::format("{:?} is listed for this program but no longer resolves to a tool the agent may "
                                 "call; it is never replaced by another",
                                 call.tool));
    return refused(call, tool_error_kind::unknown_tool,
                   fmt::format("no tool named {:?} is offered to this program; TOOLS lists those that are", call.tool));
  }
  // The codec already proved `arguments` is one JSON value; a program may still send a non-object.
  if (call.arguments.text.empty() || call.arguments.text.front() != '{')
    return refused(call, tool_error_kind::malformed_call, "arguments must be a JSON object");
  const auto& budget = setup_.budget;
  if (call.arguments.text.size() > budget.max_argument_bytes.value)
    return refused(call, tool_error_kind::argument_too_large,
                   fmt::format("argument_bytes: {} bytes of arguments, the ceiling per call is {}",
                               call.arguments.text.size(), budget.max_argument_bytes.value));
  if (const auto out = exhausted_by(budget, spent_, run_spent(), {.calls = 1}))
    return refused(call, tool_error_kind::budget_exhausted, budget_message(*out, budget, spent_, run_spent()));
  // Executions of one Run running at once: the Run's call is taken in the same step as it is checked.
  if (setup_.run.live && setup_.run.live->charge(budget, {.calls = 1}))
    return refused(call, tool_error_kind::budget_exhausted,
                   budget_message(exhaustion{meter_name::calls, meter_scope::run}, budget, spent_, run_spent()));

  admitted_call admitted{.id = call.id,
                         .call_id = fmt::format("{}-{}", setup_.run.execution_id, call.id),
                         .tool = call.tool,
                         .arguments_json = call.arguments.text};
  // Counted from here, and spent once proceed() has made this record durable: nothing of the
  // call happens before that.
  if (!journal(call_started{.call_id = admitted.call_id,
                            .execution_id = setup_.run.execution_id,
                            .tool = call.tool,
                            .argument_bytes = call.arguments.text.size()})) {
    if (setup_.run.live) setup_.run.live->refund({.calls = 1});
    return refused(call, tool_error_kind::cancelled, "the run log could not record the call, so it was not made");
  }
  ++spent_.calls;  // the Run's live meter took it above
  started_not_durable_ = setup_.run.log != nullptr;
  return admitted;
}

binding_gateway::admission binding_gateway::proceed(const admitted_call& admitted) {
  // One sync for every call admitted since the last: the group a program's gathered calls form.
  if (started_not_durable_) {
    if (!sync_journal())
      return refused(admitted.id, admitted.tool, tool_error_kind::cancelled,
                     "the run log could not record the call, so it was not made");
    started_not_durable_ = false;
  }
  if (callable_builtin(admitted.tool)) return builtin_answer(admitted);
  const tool_call asked{admitted.call_id, setup_.run.execution_id, admitted.tool, admitted.arguments_json};
  const auto permission = setup_.invoker->permit(asked);
  using verdict = call_permission::verdict;
  if (permission.decision == verdict::needs_approval)
    return refuse_admitted(admitted, tool_error_kind::approval_required_in_program,
                           fmt::format("{} needs a person's approval, which nobody can give while a program runs: "
                                       "have the model call it directly{}",
                                       admitted.tool, permission.reason.empty() ? "" : " (" + permission.reason + ")"));
  if (permission.decision == verdict::denied)
    return refuse_admitted(admitted, tool_error_kind::denied,
                           permission.reason.empty() ? "the policy refused this call" : permission.reason);
  return admitted;
}

protocol::result_frame binding_gateway::builtin_answer(const admitted_call& admitted) {
  const auto& offered = setup_.offered;
  const auto& arguments = admitted.arguments_json;
  if (admitted.tool == "list_tools") {
    auto asked = protocol::decode_json<builtin_args::list_tools>(arguments);
    if (!asked) return refuse_admitted(admitted, tool_error_kind::malformed_call, asked.error().message());
    const auto total = static_cast<std::int64_t>(offered.size());
    const std::int64_t offset = std::clamp<std::int64_t>(asked.value().offset.value_or(0), 0, total);
    const std::int64_t limit = std::clamp<std::int64_t>(asked.value().limit.value_or(list_window_max), 0, list_window_max);
    builtin_args::tool_list list{.total = total};
    for (std::int64_t i = offset; i < std::min(total, offset + limit); ++i) {
      const auto& tool = offered[static_cast<std::size_t>(i)];
      list.tools.push_back({tool.name, shortened(tool.description), tool.deferred});
    }
    if (offset + limit < total) list.next_offset = offset + limit;
    return complete(admitted, tool_outcome::value(protocol::encode_json(list)));
  }
  if (admitted.tool == "read_tool_output") return read_window(admitted);
  auto asked = protocol::decode_json<builtin_args::get_tool_info>(arguments);
  if (!asked) return refuse_admitted(admitted, tool_error_kind::malformed_call, asked.error().message());
  const binding* tool = find(asked.value().name);
  if (!tool)
    return refuse_admitted(admitted, tool_error_kind::unknown_tool,
                           fmt::format("no tool named {:?} is offered to this program", asked.value().name));
  auto schema = protocol::decode_json<json_text>(tool->input_schema_json);
  const builtin_args::tool_info info{.name = tool->name,
                                     .description = tool->description,
                                     .deferred = tool->deferred,
                                     .input_schema = schema ? std::move(schema).value() : json_text{"{}"}};
  return complete(admitted, tool_outcome::value(protocol::encode_json(info)));
}

protocol::result_frame binding_gateway::refuse_admitted(const admitted_call& call, tool_error_kind kind,
                                                        std::string message) {
  journal(call_finished{.call_id = call.call_id, .outcome = kind});
  return refused(call.id, call.tool, kind, std::move(message));
}

protocol::result_frame binding_gateway::complete(const admitted_call& call, const tool_outcome& outcome) {
  if (!outcome.ok) return refuse_admitted(call, outcome.kind, outcome.message);
  const auto& budget = setup_.budget;
  const std::uint64_t size = outcome.value_json.size();
  // Made by the host's tool, whether or not the program receives it.
  const auto produced_out = exhausted_by(budget, spent_, run_spent(), {.produced = size});
  spend({.produced = size});
  const auto refuse = [&](tool_error_kind kind, std::string message) {
    journal(call_finished{.call_id = call.call_id, .outcome = kind, .produced = size});
    return refused(call.id, call.tool, kind, std::move(message));
  };
  if (produced_out)
    return refuse(tool_error_kind::budget_exhausted, budget_message(*produced_out, budget, spent_, run_spent()));
  // Over the per-call ceiling: preserved and handed over as a handle to page through, or, with
  // nowhere to preserve it, refused whole; never truncated.
  if (size > budget.max_result_bytes.value) {
    if (!setup_.blobs)
      return refuse(tool_error_kind::binding_result_not_paged,
                    fmt::format("result_bytes: the result is {} bytes, the ceiling per call is {}, and no BlobStore "
                                "is wired to preserve it for paging",
                                size, budget.max_result_bytes.value));
    return hand_over_handle(call, outcome.value_json);
  }
  // The recording keeps the value in the log: that is what `preserved` counts, where there is a log.
  const std::uint64_t kept = setup_.run.log ? size : 0;
  if (const auto out = exhausted_by(budget, spent_, run_spent(), {.transfer = size, .preserved = kept}))
    return refuse(tool_error_kind::budget_exhausted, budget_message(*out, budget, spent_, run_spent()));
  // The invoker is the runtime's, not ours to trust with the frame: its value is checked first.
  auto value = protocol::decode_json<json_text>(outcome.value_json);
  if (!value)
    return refuse(tool_error_kind::tool_failed,
                  fmt::format("the tool's result is not one JSON value: {}", value.error().message()));
  if (!journal(call_finished{.call_id = call.call_id, .outcome = call_outcome::ok(), .produced = size, .transfer = size,
                             .preserved = kept, .value_json = setup_.run.log ? outcome.value_json : std::string{}}))
    return refused(call.id, call.tool, tool_error_kind::cancelled,
                   "the run log could not record the result, so it is not handed over");
  spend({.transfer = size, .preserved = kept});
  return {.id = call.id, .ok = true, .value = std::move(value).value(), .error = std::nullopt};
}

namespace {

/// The preserved form of a large result: pretty-printed, so that line windows and patterns find
/// its members instead of one enormous line. Nullopt when the text is not one JSON value.
std::optional<std::string> pretty_printed(const std::string& json) {
  rapidjson::Document document;
  document.Parse<rapidjson::kParseStopWhenDoneFlag>(json.data(), json.size());
  if (document.HasParseError()) return std::nullopt;
  rapidjson::StringBuffer buffer;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> writer(buffer);
  writer.SetIndent(' ', 1);
  document.Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace

protocol::result_frame binding_gateway::hand_over_handle(const admitted_call& call, const std::string& value_json) {
  const auto& budget = setup_.budget;
  const std::uint64_t size = value_json.size();
  const auto refuse = [&](tool_error_kind kind, std::string message) {
    journal(call_finished{.call_id = call.call_id, .outcome = kind, .produced = size});
    return refused(call.id, call.tool, kind, std::move(message));
  };
  if (auto valid = protocol::decode_json<json_text>(value_json); !valid)
    return refuse(tool_error_kind::tool_failed,
                  fmt::format("the tool's result is not one JSON value: {}", valid.error().message()));
  const auto text = pretty_printed(value_json);
  if (!text) return refuse(tool_error_kind::tool_failed, "the tool's result could not be re-read for preserving");
  if (const auto out = exhausted_by(budget, spent_, run_spent(), {.preserved = text->size()}))
    return refuse(tool_error_kind::budget_exhausted, budget_message(*out, budget, spent_, run_spent()));
  auto stored = setup_.blobs->put(setup_.tenant, "application/json", *text);
  if (!stored)
    return refuse(tool_error_kind::binding_result_not_paged,
                  fmt::format("result_bytes: the result is {} bytes, over the ceiling of {}, and preserving it "
                              "failed: {}",
                              size, budget.max_result_bytes.value, stored.error().message()));
  const protocol::result_handle handle{.handle = stored.value().handle,
                                       .size_bytes = text->size(),
                                       .lines = static_cast<std::uint64_t>(std::count(text->begin(), text->end(), '\n')) + 1};
  const auto handle_json = protocol::encode_json(handle);
  if (const auto out = exhausted_by(budget, spent_, run_spent(), {.transfer = handle_json.size()}))
    return refuse(tool_error_kind::budget_exhausted, budget_message(*out, budget, spent_, run_spent()));
  // The call is the success it was: recorded with the handle it became.
  if (!journal(call_finished{.call_id = call.call_id, .outcome = call_outcome::ok(), .produced = size,
                             .transfer = handle_json.size(), .preserved = text->size(), .value_json = handle_json}))
    return refused(call.id, call.tool, tool_error_kind::cancelled,
                   "the run log could not record the result, so it is not handed over");
  spend({.transfer = handle_json.size(), .preserved = text->size()});
  own_handles_.insert(handle.handle);
  return {.id = call.id, .ok = true, .value = std::nullopt, .error = std::nullopt, .handle = handle};
}

protocol::result_frame binding_gateway::read_window(const admitted_call& admitted) {
  auto asked = protocol::decode_json<builtin_args::read_tool_output>(admitted.arguments_json);
  if (!asked) return refuse_admitted(admitted, tool_error_kind::malformed_call, asked.error().message());
  const auto& request = asked.value();
  // Only what this program's own calls produced: a handle is not a capability to another's bytes.
  if (!own_handles_.contains(request.handle))
    return refuse_admitted(admitted, tool_error_kind::denied,
                           "read_tool_output reads only handles this program's own calls produced");
  const output_request window{.offset = request.offset.value_or(0),
                              .limit = request.limit.value_or(100),
                              .pattern = request.pattern};
  const output_bounds bounds{.max_bytes = setup_.budget.max_result_bytes.value, .cut_to_fit = false};
  auto read = read_tool_output(*setup_.blobs, setup_.tenant, request.handle, window, bounds);
  if (!read) {
    const auto kind = read.error().kind == error_kind::output_window_too_large  ? tool_error_kind::binding_result_too_large
                      : read.error().kind == error_kind::output_pattern_rejected ? tool_error_kind::malformed_call
                                                                                  : tool_error_kind::tool_failed;
    return refuse_admitted(admitted, kind, read.error().message());
  }
  return complete(admitted, tool_outcome::value(protocol::encode_json(read.value())));
}

void binding_gateway::abandon(const admitted_call& call, const tool_outcome& outcome) {
  const std::uint64_t size = outcome.ok ? outcome.value_json.size() : 0;
  spend({.produced = size});
  journal(call_finished{.call_id = call.call_id,
                        .outcome = outcome.ok ? tool_error_kind::cancelled : outcome.kind,
                        .produced = size});
}

std::vector<protocol::binding_info> binding_gateway::bindings_for_run() const {
  std::vector<protocol::binding_info> out;
  for (const auto& offered : setup_.offered) out.push_back({offered.name, offered.description, offered.deferred});
  return out;
}

std::vector<protocol::excluded_builtin> binding_gateway::excluded_for_run() {
  std::vector<protocol::excluded_builtin> out;
  for (const auto& rule : builtin_rules)
    if (!rule.reason.empty()) out.push_back({std::string(rule.name), std::string(rule.reason)});
  return out;
}

}  // namespace psych::host
