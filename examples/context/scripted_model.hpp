#pragma once
// What the two context examples share: the scripted model reads the text of a tools/call result the
// way a model reads it, and makes its one run_code call through a runtime, so the bytes counted for
// the program are the runtime's own payload and not a figure the example makes up.
#include <filesystem>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <boost/hana/adapt_struct.hpp>

#include "psych/host/run_log.hpp"
#include "psych/host/runtime.hpp"
#include "psych/protocol/json.hpp"

namespace scripted_model {

struct content_item {
  std::string type;
  std::optional<std::string> text;
};
struct call_result {
  std::vector<content_item> content;
};

}  // namespace scripted_model

BOOST_HANA_ADAPT_STRUCT(scripted_model::content_item, type, text);
BOOST_HANA_ADAPT_STRUCT(scripted_model::call_result, content);

namespace scripted_model {

/// The text of a tools/call result: {"content":[{"type":"text","text":...}]}.
inline std::string text_of(const std::string& result_json) {
  auto decoded = psych::protocol::decode_json<call_result>(result_json);
  if (!decoded || decoded.value().content.empty()) return {};
  return decoded.value().content.front().text.value_or("");
}

/// One run_code call that ran, and what the model reads back from it.
struct program_turn {
  psych::sandbox_result result;
  std::string payload;  ///< run_code_payload: the bytes that enter the model's context
};

/// Runs `program` as one run_code call of an agent with code execution, in the local sandbox, its
/// calls reaching the tools of `catalogue` through `invoker` (`server` is the connected MCP server
/// the bindings are addressed to). The run log is written at `log_path`. A refusal is
/// sandbox_setup: the examples compare programs that ran, and this host could not run one.
inline psych::result<program_turn> run_program(psych::tool_catalogue& catalogue, psych::tool_invoker& invoker,
                                               const std::string& server, const std::string& program,
                                               const std::filesystem::path& log_path) {
  PSYCH_TRY(auto sandbox, psych::local_sandbox({}));
  PSYCH_TRY(auto rt, psych::runtime::create({.single = std::shared_ptr<psych::sandbox>(std::move(sandbox)),
                                             .connected_servers = {server},
                                             .catalogue = &catalogue,
                                             .invoker = &invoker}));
  PSYCH_TRY(const auto version, rt.publish({.name = "accountant",
                                            .model = {.model = "scripted"},
                                            .code = psych::code_execution{}}));
  PSYCH_TRY(auto log, psych::open_file_run_log(log_path.string()));
  PSYCH_TRY(auto attempt, rt.start_attempt(version, *log, "example"));
  PSYCH_TRY(auto outcome, attempt.run_code(program));
  auto payload = psych::run_code_payload(outcome, *version.spec.code);
  if (const auto* refused = std::get_if<psych::refusal>(&outcome))
    return psych::fail_with(psych::error_kind::sandbox_setup, "run_code was refused: " + refused->message);
  return program_turn{std::get<psych::sandbox_result>(std::move(outcome)), std::move(payload)};
}

}  // namespace scripted_model
