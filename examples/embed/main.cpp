// A runtime embedding psych: two sandbox profiles, an agent spec with code execution, one C++
// function tool that programs call by its alias and through call_tool, an MCP server's tools beside
// it, and five programs — a loop over the tool, one that lists and calls what it may (with and
// without `bindings`), one that raises, one under a profile that does not exist, and one that
// overruns a tight profile's wall clock. Everything comes back as data; this program checks each
// story and exits non-zero when one did not go as docs/runtime.md says it does.
//
// The regions between "// [embed:NAME]" and "// [/embed:NAME]" are quoted by docs/runtime.md, and
// a test (tests/docs/check_snippets.py) fails when the two differ; another builds and runs the
// doc's quotes alone, in the doc's order, as one program.
// [embed:includes]
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <boost/hana/adapt_struct.hpp>

#include <psych/host/binding_sources.hpp>
#include <psych/host/blob_store.hpp>
#include <psych/host/function_tools.hpp>
#include <psych/host/mcp.hpp>
#include <psych/host/run_log.hpp>
#include <psych/host/runtime.hpp>
#include <psych/host/sandbox.hpp>
// [/embed:includes]

// [embed:types]
// The tool's arguments and answer are plain structs; the codec walks them (Hana), and the input
// schema the program sees in TOOLS is generated from the arguments' struct.
struct order_query {
  std::string sku;
  static constexpr std::array<std::string_view, 1> required_members{"sku"};
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 1> member_descriptions{
      {{"sku", "the stock-keeping unit, e.g. A-1"}}};
};
struct order {
  std::string sku;
  int quantity = 0;
  double total = 0;
};
BOOST_HANA_ADAPT_STRUCT(order_query, sku);
BOOST_HANA_ADAPT_STRUCT(order, sku, quantity, total);
// [/embed:types]

// [embed:helpers]
namespace {

/// The program's result, when run_code ran it; the other alternative is a refusal (nothing ran).
const psych::sandbox_result* ran(const psych::run_code_outcome& outcome) {
  return std::get_if<psych::sandbox_result>(&outcome);
}

// A program as a model writes it: Python whose top level may await the agent's tools and return
// a value.
constexpr std::string_view loop_program = R"(
totals = {}
for sku in ["A-1", "B-2", "C-3"]:
    found = await lookup_order(sku=sku)          # the alias: keyword arguments
    totals[sku] = found["total"]
try:
    await call_tool("lookup_order", {"sku": "Z-9"})  # call_tool: the name and one dict
except ToolError as error:
    missing = error.kind
print(f"looked up {len(totals)} orders")
return {"sum": sum(totals.values()), "missing": missing}
)";

}  // namespace
// [/embed:helpers]

namespace {

int failures = 0;

void expect(bool held, std::string_view story) {
  std::printf("%s %.*s\n", held ? "  ok:" : "  FAILED:", static_cast<int>(story.size()), story.data());
  if (!held) ++failures;
}

}  // namespace

psych::result<psych::runtime> capped_runtime();  // docs/runtime.md quotes it after main

// [embed:main]
int main() {
  // Scratch space for the blob store and the run log, removed when main returns.
  std::string scratch = (std::filesystem::temp_directory_path() / "psych-embed-XXXXXX").string();
  if (::mkdtemp(scratch.data()) == nullptr) return 2;
  struct cleanup {
    std::string dir;
    ~cleanup() { std::filesystem::remove_all(dir); }
  } remove_scratch{scratch};
  // [/embed:main]

  // [embed:tools]
  // One object is both the runtime's catalogue and its invoker for C++ functions: the tool is
  // named once. Calls run on the object's own threads, so a slow tool never stalls the sandbox.
  static const std::map<std::string, order, std::less<>> orders{
      {"A-1", {"A-1", 2, 19.5}}, {"B-2", {"B-2", 1, 5.25}}, {"C-3", {"C-3", 4, 42.0}}};
  auto tools = psych::function_tools::create({psych::typed_tool<order_query>(
                                                  "lookup_order", "An order by SKU: its quantity and total",
                                                  [](const order_query& query, std::stop_token) -> psych::tool_answer<order> {
                                                    const auto found = orders.find(query.sku);
                                                    if (found == orders.end()) return psych::tool_failed("no order " + query.sku);
                                                    return found->second;
                                                  })})
                   .value();
  // [/embed:tools]

  // [embed:mcp]
  // An MCP server's tools join the C++ ones as `server__tool`. mcp_client starts the server and
  // speaks MCP on its stdin and stdout; mcp_binding_source offers every tool of its servers; and
  // binding_sources makes the two sources one catalogue and one invoker.
  auto warehouse = psych::mcp_client::start({.name = "warehouse", .command = {"python3", WAREHOUSE_SERVER}});
  if (!warehouse) {
    std::fprintf(stderr, "embed: %s\n", warehouse.error().message().c_str());
    return 2;
  }
  std::vector<std::unique_ptr<psych::mcp_client>> servers;
  servers.push_back(std::move(warehouse).value());
  auto mcp = psych::mcp_binding_source::create(std::move(servers)).value();
  psych::binding_sources sources({psych::binding_source::of(*tools, "functions"), psych::binding_source::of(*mcp, "mcp")});
  // [/embed:mcp]

  // [embed:runtime]
  // Everything passed by pointer (the catalogue, the invoker, the blob store, the run log) must
  // outlive the runtime and every Attempt made from it; the sandboxes are shared_ptr.
  // connected_servers names the MCP servers whose `server__tool` a spec may be granted.
  auto blobs = psych::open_directory_blob_store(scratch + "/blobs").value();
  auto made = psych::local_sandbox();  // the strongest local backend; a not-ready one is an error
  if (!made) {
    std::fprintf(stderr, "embed: %s\n", made.error().message().c_str());
    return 2;
  }
  std::shared_ptr<psych::sandbox> sandbox = std::move(made).value();
  auto rt = psych::runtime::create({.profiles = {{.name = "default", .backend = sandbox},
                                                 {.name = "tight", .backend = sandbox, .hard_limits = psych::limit_caps{.wall_seconds = 1.0}}},
                                    .connected_servers = {"warehouse"},
                                    .catalogue = &sources,
                                    .invoker = &sources,
                                    .blobs = blobs.get()})
                .value();
  // [/embed:runtime]

  // [embed:spec]
  // The agent asks for a profile by name and for terms no wider than it; publishing checks the
  // spec against the runtime (its profiles, its catalogue) and fixes the Version's hash.
  psych::agent_spec spec{.name = "clerk",
                         .model = {.model = "gpt-5"},
                         .tools = {{.kind = psych::tool_kind::code, .name = "lookup_order"},
                                   {.kind = psych::tool_kind::code, .name = "warehouse__stock_level"}},
                         .code = psych::code_execution{.profile = "default"}};
  const auto version = rt.publish(spec);
  if (!version) {
    std::fprintf(stderr, "embed: %s\n", version.error().message().c_str());
    return 2;
  }
  // [/embed:spec]

  // [embed:attempt]
  // A run log per Run is required: the Run's meters are counted from it, and a call in flight
  // when a worker dies is found there by the next Attempt (and never re-run).
  auto log = psych::open_file_run_log(scratch + "/run.log").value();
  auto attempt = rt.start_attempt(version.value(), *log, "tenant-a").value();
  const auto looped = attempt.run_code(std::string(loop_program));
  if (!looped) {  // an error here is the deployment's (a policy that widened the grant), not the program's
    std::fprintf(stderr, "embed: %s\n", looped.error().message().c_str());
    return 2;
  }
  // What the model reads back: compact, and graded against what the spec asked.
  std::printf("the model reads: %s\n", psych::run_code_payload(looped.value(), *spec.code).c_str());
  // [/embed:attempt]
  const auto* loop = ran(looped.value());
  expect(loop && loop->ok() && loop->value && loop->value->text == R"({"sum":66.75,"missing":"tool_failed"})",
         "a loop over the tool returns one value: three orders summed, the missing one a ToolError");
  expect(loop && loop->stdout_preview == "looked up 3 orders\n", "what it printed comes back as stdout");

  // [embed:bindings]
  // Without `bindings` a program may call every tool the catalogue offers now, whatever the spec's
  // `tools` list: warehouse__reset_stock too. `bindings` is what narrows it.
  const auto everything = attempt.run_code("return list(TOOLS)").value();
  auto narrowed = spec;
  narrowed.code->bindings = std::vector<std::string>{"lookup_order", "warehouse__stock_level"};
  auto narrowed_attempt = rt.start_attempt(rt.publish(narrowed).value(), *log, "tenant-a").value();
  const auto bound = narrowed_attempt
                         .run_code("level = await warehouse__stock_level(sku='A-1')\n"
                                   "return {'tools': list(TOOLS), 'units': level['structuredContent']['units']}\n")
                         .value();
  for (const auto* outcome : {&everything, &bound})
    if (const auto* result = ran(*outcome); result && result->value)
      std::printf("the program got %s\n", result->value->text.c_str());
  // [/embed:bindings]
  const auto* all_tools = ran(everything);
  expect(all_tools && all_tools->value && all_tools->value->text.find("warehouse__reset_stock") != std::string::npos,
         "without bindings a program sees every tool of the connected server, not only the spec's");
  const auto* narrow = ran(bound);
  expect(narrow && narrow->value &&
             narrow->value->text == R"({"tools":["lookup_order","warehouse__stock_level"],"units":7})",
         "bindings narrow what a program may call; the MCP tool answers through its alias");

  // [embed:traceback]
  // A program that raises is a result, not an error: the failure carries the traceback, with the
  // program's own line.
  const auto raised = attempt.run_code("rows = []\nraise ValueError('bad row')\n").value();
  if (const auto* result = ran(raised); result && result->failure)
    std::printf("failure %s at line %lld: %s\n", std::string(psych::name_of(result->failure->kind)).c_str(),
                static_cast<long long>(result->failure->line), result->failure->message.c_str());
  // [/embed:traceback]
  const auto* raise = ran(raised);
  expect(raise && raise->failure && raise->failure->kind == psych::failure_kind::exception && raise->failure->line == 2 &&
             raise->failure->traceback.find("ValueError: bad row") != std::string::npos,
         "a traceback is data: the exception, its message and the program's line");

  // [embed:unknown_profile]
  // A spec that asks for a profile the runtime does not have fails at publish, loudly.
  auto gpu = spec;
  gpu.code->profile = "gpu";
  const auto refused = rt.publish(gpu);
  if (!refused) std::printf("publish refused: %s\n", refused.error().message().c_str());
  // [/embed:unknown_profile]
  expect(!refused && refused.error().message().find("profile \"gpu\"") != std::string::npos,
         "an unknown profile is a publish error naming it");

  // [embed:tight]
  // The tight profile caps only the wall clock (1 s); the program's other limits stay what the
  // backend allows. Overrunning it ends the program, and the result says which cap did.
  auto tight = spec;
  tight.code->profile = "tight";
  auto tight_attempt = rt.start_attempt(rt.publish(tight).value(), *log, "tenant-a").value();
  const auto slept = tight_attempt.run_code("print('started')\nimport time\ntime.sleep(30)\n").value();
  if (const auto* result = ran(slept); result && result->limit_hit)
    std::printf("ended by %s after %.1f s\n", std::string(psych::name_of(*result->limit_hit)).c_str(),
                result->duration_seconds);
  // [/embed:tight]
  const auto* overran = ran(slept);
  expect(overran && overran->limit_hit == psych::limit_name::wall_seconds && overran->duration_seconds < 10,
         "the tight profile's wall clock ends a program that sleeps, and says so");

  auto capped = capped_runtime();
  auto heavy = spec;
  heavy.code->profile = "heavy";
  heavy.tools.clear();  // that runtime has no catalogue
  expect(capped && capped.value().publish(heavy).has_value(), "a backend with a ceiling of its own, under two profiles");

  if (failures != 0) {
    std::printf("embed: %d stories did not behave as documented\n", failures);
    return 1;
  }
  std::printf("embed: every story behaved as documented\n");
  // [embed:end]
  return 0;
}
// [/embed:end]

// [embed:ceiling]
/// A backend with a ceiling of its own, under two profiles that cap it further.
psych::result<psych::runtime> capped_runtime() {
  psych::local_sandbox_options options;
  options.limit_ceiling = {.cpu_seconds = 60.0, .wall_seconds = 300.0};  // the backend's ceiling
  auto made = psych::local_sandbox(options);
  if (!made) return made.error();
  std::shared_ptr<psych::sandbox> backend = std::move(made).value();
  return psych::runtime::create(
      {.profiles = {{.name = "default", .backend = backend, .hard_limits = {.cpu_seconds = 10.0, .wall_seconds = 30.0}},
                    {.name = "heavy", .backend = backend, .hard_limits = {.wall_seconds = 120.0}}}});
}
// [/embed:ceiling]
