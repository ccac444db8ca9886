#include "mcp_server/offered_tools.hpp"

#include <map>

#include <boost/hana/adapt_struct.hpp>
#include <fmt/format.h>

#include "psych/agent.hpp"
#include "psych/protocol/json.hpp"
#include "psych/utf8.hpp"

namespace psych::host {
namespace {

/// The first sentence of a description, on one line, at most 160 bytes.
std::string first_sentence(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size() && out.size() < 160; ++i) {
    const char c = text[i];
    if (c == '\n' || c == '\r' || c == '\t') {
      if (!out.empty() && out.back() != ' ') out.push_back(' ');
      continue;
    }
    out.push_back(c);
    if (c == '.' && (i + 1 == text.size() || text[i + 1] == ' ' || text[i + 1] == '\n')) break;
  }
  if (out.size() >= 160) out.resize(utf8::floor_boundary(out, 157)), out.append("...");
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

bool is_identifier(std::string_view name) {
  if (name.empty() || (name.front() >= '0' && name.front() <= '9')) return false;
  for (const char c : name)
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
  return true;
}

/// "12 MiB" for whole mebibytes, else bytes.
std::string bytes_text(std::uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} bytes", bytes);
}

/// The catalogue as the description shows it, in the first form that fits: every tool with the
/// first sentence of its description; every tool by name; or, for a catalogue too large to name
/// (a 351-tool server), each server's count of tools, with list_tools() as the way in.
std::string catalogue_text(const std::vector<binding>& tools) {
  if (tools.empty()) return "No tools are bound: the program computes on its own (TOOLS is empty).\n";
  std::string described, named;
  for (const auto& tool : tools) {
    const auto sentence = first_sentence(tool.description);
    described.append(sentence.empty() ? fmt::format("- {}\n", tool.name) : fmt::format("- {}: {}\n", tool.name, sentence));
    named.append(named.empty() ? "" : ", ").append(tool.name);
  }
  const auto header = fmt::format("The program may call these {} tools", tools.size());
  if (described.size() <= description_catalogue_bytes) return header + ":\n" + described;
  if (named.size() <= description_catalogue_bytes) return header + " (`await get_tool_info(name)` describes one): " + named + ".\n";
  std::map<std::string, std::size_t> per_source;
  for (const auto& tool : tools) {
    const auto split = tool.name.find("__");
    ++per_source[split == std::string::npos ? std::string("(functions)") : tool.name.substr(0, split)];
  }
  std::string counted;
  for (const auto& [source, count] : per_source)
    counted.append(counted.empty() ? "" : ", ").append(fmt::format("{} tools of {}", count, source));
  return fmt::format("The program may call {} tools, too many to name here: {}. Find them in the program: "
                     "`await list_tools(offset=0)` returns 100 names and descriptions at a time and the next "
                     "offset.\n",
                     tools.size(), counted);
}

std::string example_call(const std::vector<binding>& tools) {
  for (const auto& tool : tools)
    if (is_identifier(tool.name)) return fmt::format("`await {}(key=value)`", tool.name);
  return "`await name(key=value)` for a name that is a Python identifier";
}

}  // namespace

std::string run_code_description(const std::vector<binding>& tools, const execution_terms& terms,
                                 const binding_budget& budget, bool outputs_preserved) {
  const auto& limits = terms.limits;
  std::string text = fmt::format(
      "Runs one Python program in a fresh sandbox (isolation: {}; no network; wall clock {} s, CPU {} s, "
      "memory {}, {} processes) and returns its result as compact JSON: `value` (what the program "
      "returned), `stdout` and `stderr`, `failure` with the traceback and line when it raised, `limit_hit` "
      "when a limit ended it, and `partial` previews for output too large to show whole{}. "
      "Write one program that does the whole task, looping over tool calls, rather than one call per turn.\n\n"
      "The program may use top-level `await` and `return`; without `return`, its last expression is its value. "
      "Nothing persists between calls: the workspace is a new empty directory each time.\n\n",
      name_of(terms.isolation), limits.wall_seconds.value, limits.cpu_seconds.value,
      bytes_text(limits.address_space_bytes.value), limits.process_count.value,
      outputs_preserved ? " (with a handle: read the rest with read_tool_output)" : "");
  text.append(catalogue_text(tools));
  if (!tools.empty())
    text.append(fmt::format(
        "\nCall a tool as {}, or any name as `await call_tool(\"name\", {{\"key\": value}})` (names that are not "
        "identifiers). `TOOLS` is the sorted tuple of names; `await list_tools()` lists them with descriptions "
        "and `await get_tool_info(\"name\")` returns one tool's input schema: read it before calling a tool "
        "whose arguments you do not know. Calls can run together with asyncio.gather. A call that fails raises "
        "ToolError with `.kind` (branch on it) and `.tool`. A result too large to hand over whole comes as a "
        "ToolResultHandle: `await handle.read(offset=0, limit=100, pattern=None)` pages through it.\n",
        example_call(tools)));
  text.append(fmt::format(
      "\nBudget: {} tool calls and {} of results per program; {} calls in this session, across every run_code.",
      budget.max_calls.value, bytes_text(budget.max_transfer_bytes.value), budget.max_run_calls.value));
  return text;
}

namespace {

struct tool_entry {
  std::string name;
  std::string title;
  std::string description;
  json_text inputSchema;
  json_text annotations;
};

constexpr const char* run_code_schema = R"({"type":"object","properties":{)"
    R"("program":{"type":"string","description":"The Python program: top-level await and return allowed."},)"
    R"("limits":{"type":"object","description":"Narrower limits for this program only (never wider than the server's).",)"
    R"("properties":{"wall_seconds":{"type":"number","exclusiveMinimum":0},"cpu_seconds":{"type":"number","exclusiveMinimum":0},)"
    R"("memory_bytes":{"type":"integer","minimum":1},"file_size_bytes":{"type":"integer","minimum":1},)"
    R"("process_count":{"type":"integer","minimum":1}},"additionalProperties":false}},)"
    R"("required":["program"],"additionalProperties":false})";

constexpr const char* read_output_schema = R"({"type":"object","properties":{)"
    R"("handle":{"type":"string","description":"A handle from a run_code result of this session."},)"
    R"("offset":{"type":"integer","minimum":0,"description":"The first line (0-based)."},)"
    R"("limit":{"type":"integer","minimum":1,"description":"At most this many lines (default 100)."},)"
    R"("pattern":{"type":"string","description":"Only the lines matching this regular expression."}},)"
    R"("required":["handle"],"additionalProperties":false})";

}  // namespace
}  // namespace psych::host

BOOST_HANA_ADAPT_STRUCT(psych::host::tool_entry, name, title, description, inputSchema, annotations);

namespace psych::host {

std::string tools_list_json(const std::string& run_code_text, bool outputs_preserved) {
  struct listing {
    std::vector<tool_entry> tools;
  };
  std::vector<tool_entry> tools{
      {.name = std::string(run_code_tool),
       .title = "Run Python in psych's sandbox",
       .description = run_code_text,
       .inputSchema = {run_code_schema},
       // It runs code that may call the upstream tools: neither read-only nor closed-world.
       .annotations = {R"({"readOnlyHint":false,"destructiveHint":false,"idempotentHint":false,"openWorldHint":true})"}}};
  if (outputs_preserved)
    tools.push_back({.name = std::string(read_tool_output_tool),
                     .title = "Read more of a run_code output",
                     .description = "Reads a window of an output a run_code call of this session preserved (its "
                                    "`partial` item's handle): lines from `offset`, at most `limit`, or only those "
                                    "matching `pattern`.",
                     .inputSchema = {read_output_schema},
                     .annotations = {R"({"readOnlyHint":true,"openWorldHint":false})"}});
  std::string out = R"({"tools":[)";
  for (std::size_t i = 0; i < tools.size(); ++i) out.append(i ? "," : "").append(protocol::encode_json(tools[i]));
  out.append("]}");
  return out;
}

}  // namespace psych::host
