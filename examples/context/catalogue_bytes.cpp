// The context benchmark at catalogue scale: one task, done three ways by a scripted model (no LLM)
// against an MCP server offering 351 tools (catalogue_server.py), of which the task needs three.
//
// The task: for the customers with an open urgent support ticket, total the overdue invoices per
// account manager. It takes one tickets listing, then a customer lookup and an invoice listing per
// customer: about forty calls.
//   (a) every schema in the prompt, then a direct call per step (call and whole result enter the
//       context);
//   (b) the catalogue deferred: only the 351 names in the prompt, beside a lookup tool; the model
//       fetches the schema of each tool it uses once, then calls directly as in (a);
//   (c) only run_code in the prompt: one program finds the three tools with list_tools(), reads
//       their schemas with get_tool_info(), and loops; only the program and the model's payload of
//       its result (run_code_payload) enter the context.
//
// Context bytes: what enters the model's context, each thing counted once (the prompt's tool
// definitions are a prefix read at every turn but written once). Beside that figure, the bytes
// read over the whole conversation, if every turn re-reads everything before it and (a) and (b)
// make one call per turn; a model making parallel calls has fewer turns, so that figure is the
// generous one and the target is judged on the first. The task's own words and the model's final
// answer are the same in all three and left out.
//
// It prints BENCH lines, checks that the three answers agree with the one computed from the data,
// and fails when they do not, or when (c) is not at least 99% smaller than (a).
//   (d) with psych's path as the second argument: (c)'s program through `psych mcp`, from the client's
//       side: psych mcp's own tool definitions are the prompt (run_code's description is made from
//       the catalogue), then the program and the result's text.
//   build/examples/context/catalogue_bytes examples/context/catalogue_server.py [build/apps/psych]
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <ranges>
#include <set>
#include <string>

#include <boost/hana/adapt_struct.hpp>
#include <fmt/format.h>

#include "psych/host/mcp.hpp"
#include "scripted_model.hpp"

// The records the server serves, written by this program so that it knows the right answer.
namespace data {
struct person {
  std::string id, name, email;
};
struct address {
  std::string line1, city, postal_code, country;
};
struct customer {
  std::string id, name, region, tier, status;
  person account_manager;
  address billing_address;
  std::string created_at;
};
struct invoice {
  std::string id, number, customer_id, status, currency, issued_on, due_on;
  std::int64_t amount_due_cents = 0, amount_paid_cents = 0;
};
struct ticket {
  std::string id, subject, status, priority, channel, customer_id, assignee_id, created_at;
  std::vector<std::string> tags;
};
struct everything {
  std::vector<customer> customers;
  std::vector<invoice> invoices;
  std::vector<ticket> tickets;
};
/// What the list tools answer.
struct ticket_page {
  std::vector<ticket> tickets;
  std::optional<std::string> next_cursor;
};
struct invoice_page {
  std::vector<invoice> invoices;
};
/// One tool as the model is shown it.
struct definition {
  std::string name;
  std::string description;
  psych::json_text input_schema;
};
/// What a client of `psych mcp` reads back from one run_code call: the result's text content, and
/// in it the payload's value.
struct text_item {
  std::string text;
};
struct call_text {
  std::vector<text_item> content;
};
struct valued_answer {
  std::map<std::string, std::int64_t> value;  // owed_by_manager, below
};
}  // namespace data

BOOST_HANA_ADAPT_STRUCT(data::person, id, name, email);
BOOST_HANA_ADAPT_STRUCT(data::address, line1, city, postal_code, country);
BOOST_HANA_ADAPT_STRUCT(data::customer, id, name, region, tier, status, account_manager, billing_address, created_at);
BOOST_HANA_ADAPT_STRUCT(data::invoice, id, number, customer_id, status, currency, issued_on, due_on, amount_due_cents,
                        amount_paid_cents);
BOOST_HANA_ADAPT_STRUCT(data::ticket, id, subject, status, priority, channel, customer_id, assignee_id, created_at,
                        tags);
BOOST_HANA_ADAPT_STRUCT(data::everything, customers, invoices, tickets);
BOOST_HANA_ADAPT_STRUCT(data::ticket_page, tickets, next_cursor);
BOOST_HANA_ADAPT_STRUCT(data::invoice_page, invoices);
BOOST_HANA_ADAPT_STRUCT(data::definition, name, description, input_schema);
BOOST_HANA_ADAPT_STRUCT(data::text_item, text);
BOOST_HANA_ADAPT_STRUCT(data::call_text, content);
BOOST_HANA_ADAPT_STRUCT(data::valued_answer, value);

namespace {

constexpr std::string_view server_name = "ops";
constexpr int customer_count = 40;
constexpr int invoices_per_customer = 5;
constexpr int ticket_count = 60;

/// The answer: overdue cents per account manager's name.
using owed_by_manager = std::map<std::string, std::int64_t>;

bool urgent_and_open(const data::ticket& t) { return t.status == "open" && t.priority == "urgent"; }

data::everything make_data() {
  const std::array<data::person, 5> managers{{{"emp-1", "Ana Lima", "ana.lima@example.com"},
                                              {"emp-2", "Bo Chen", "bo.chen@example.com"},
                                              {"emp-3", "Carla Ruiz", "carla.ruiz@example.com"},
                                              {"emp-4", "Dev Patel", "dev.patel@example.com"},
                                              {"emp-5", "Eva Novak", "eva.novak@example.com"}}};
  const std::array<std::string_view, 8> firms{"Northwind", "Globex", "Initech", "Umbrella",
                                              "Stark",     "Wayne",  "Acme",    "Hooli"};
  const std::array<std::string_view, 5> trades{"Trading", "Logistics", "Foods", "Systems", "Labs"};
  const std::array<std::string_view, 4> cities{"Lisbon", "Toronto", "Osaka", "Lyon"};
  const std::array<std::string_view, 5> invoice_states{"paid", "overdue", "open", "paid", "overdue"};
  const std::array<std::string_view, 4> subjects{"Cannot log in after password reset",
                                                 "Invoice shows the wrong VAT rate", "Export to CSV times out",
                                                 "Webhook deliveries failing since Monday"};
  data::everything all;
  for (int c = 0; c < customer_count; ++c) {
    const auto id = fmt::format("cus-{}", 101 + c);
    all.customers.push_back({.id = id,
                             .name = fmt::format("{} {}", firms[c % firms.size()], trades[c % trades.size()]),
                             .region = c % 2 ? "eu" : "na",
                             .tier = c % 3 ? "team" : "enterprise",
                             .status = "active",
                             .account_manager = managers[(c * 7) % managers.size()],
                             .billing_address = {fmt::format("{} Market Street", 10 + c), std::string(cities[c % 4]),
                                                 fmt::format("{:05}", 10000 + c * 37), c % 2 ? "PT" : "CA"},
                             .created_at = fmt::format("2024-{:02}-{:02}T09:00:00Z", 1 + c % 12, 1 + c % 28)});
    for (int k = 0; k < invoices_per_customer; ++k) {
      const int n = c * invoices_per_customer + k;
      const std::int64_t cents = 5000 + (c * 7919 + k * 104729) % 450000;
      const auto state = invoice_states[(c + 2 * k) % invoice_states.size()];
      all.invoices.push_back({.id = fmt::format("inv-{}", 5001 + n),
                              .number = fmt::format("2025-{:05}", 1 + n),
                              .customer_id = id,
                              .status = std::string(state),
                              .currency = "EUR",
                              .issued_on = fmt::format("2025-{:02}-01", 1 + k * 2),
                              .due_on = fmt::format("2025-{:02}-01", 2 + k * 2),
                              .amount_due_cents = state == "paid" ? 0 : cents,
                              .amount_paid_cents = state == "paid" ? cents : 0});
    }
  }
  for (int t = 0; t < ticket_count; ++t) {
    all.tickets.push_back({.id = fmt::format("tic-{}", 9001 + t),
                           .subject = std::string(subjects[t % subjects.size()]),
                           .status = t % 3 == 0 || t % 5 == 2 ? "open" : "solved",
                           .priority = t % 3 == 0 || t % 7 == 1 ? "urgent" : "normal",
                           .channel = t % 2 ? "email" : "chat",
                           .customer_id = fmt::format("cus-{}", 101 + (t * 13) % customer_count),
                           .assignee_id = fmt::format("emp-{}", 6 + t % 4),
                           .created_at = fmt::format("2025-06-{:02}T{:02}:15:00Z", 1 + t % 28, t % 24),
                           .tags = {t % 2 ? "billing" : "access", "sla"}});
  }
  return all;
}

/// The answer read straight from the data, to check the three ways against.
owed_by_manager answer_of(const data::everything& all) {
  std::set<std::string> urgent;
  for (const auto& t : all.tickets)
    if (urgent_and_open(t)) urgent.insert(t.customer_id);
  owed_by_manager owed;
  for (const auto& c : all.customers) {
    if (!urgent.contains(c.id)) continue;
    auto& sum = owed[c.account_manager.name];
    for (const auto& i : all.invoices)
      if (i.customer_id == c.id && i.status == "overdue") sum += i.amount_due_cents;
  }
  return owed;
}

/// What one way put into the context: a prompt prefix, and what each turn added (a call the model
/// wrote and the result it read).
struct context {
  std::uint64_t prefix = 0;
  std::vector<std::uint64_t> turns;

  [[nodiscard]] std::uint64_t once() const { return std::accumulate(turns.begin(), turns.end(), prefix); }
  /// Each turn reads everything before it; one more turn reads it all and answers.
  [[nodiscard]] std::uint64_t reread() const {
    std::uint64_t read = 0;
    std::uint64_t so_far = prefix;
    for (const auto added : turns) {
      read += so_far;
      so_far += added;
    }
    return read + so_far;
  }
};

/// The model-facing definitions of the server's tools, by tool name, each as compact JSON.
std::map<std::string, std::string> definitions_of(const std::vector<psych::mcp_tool>& tools) {
  std::map<std::string, std::string> shown;
  for (const auto& t : tools)
    shown[t.name] = psych::protocol::encode_json(data::definition{
        fmt::format("{}__{}", server_name, t.name), t.description, psych::json_text{t.input_schema_json}});
  return shown;
}

/// A JSON array of the given elements, each already JSON.
template <class Range>
std::string json_array(const Range& elements) {
  return fmt::format("[{}]", fmt::join(elements, ","));
}

/// The task by direct calls, as (a) and (b) make them. With `lookups`, the first call of each tool
/// is preceded by a get_tool_info turn whose result is that tool's definition.
struct direct_calls {
  psych::mcp_client& ops;
  const std::map<std::string, std::string>* lookups = nullptr;
  context seen;
  std::set<std::string> looked_up;
  bool failed = false;

  template <class T>
  std::optional<T> call(const std::string& tool, const std::string& arguments) {
    if (lookups && looked_up.insert(tool).second) {
      const auto asked =
          fmt::format(R"({{"name":"get_tool_info","arguments":{{"name":"{}__{}"}}}})", server_name, tool);
      seen.turns.push_back(asked.size() + lookups->at(tool).size());
    }
    const auto answer = ops.call_tool(tool, arguments, {});
    if (!answer) {
      fmt::print(stderr, "catalogue_bytes: {}: {}\n", tool, answer.error().message());
      failed = true;
      return std::nullopt;
    }
    const auto written = fmt::format(R"({{"name":"{}__{}","arguments":{}}})", server_name, tool, arguments);
    seen.turns.push_back(written.size() + answer.value().json.size());
    auto read = psych::protocol::decode_json<T>(scripted_model::text_of(answer.value().json));
    if (!read) {
      fmt::print(stderr, "catalogue_bytes: {} answered {}\n", tool, read.error().message());
      failed = true;
      return std::nullopt;
    }
    return std::move(read).value();
  }

  owed_by_manager run() {
    std::set<std::string> customers;
    std::optional<std::string> cursor;
    do {
      const auto arguments = fmt::format(R"({{"status":"open","priority":"urgent","page_size":100{}}})",
                                         cursor ? fmt::format(R"(,"cursor":"{}")", *cursor) : "");
      const auto page = call<data::ticket_page>("support_list_tickets", arguments);
      if (!page) return {};
      for (const auto& t : page->tickets) customers.insert(t.customer_id);
      cursor = page->next_cursor;
    } while (cursor);
    owed_by_manager owed;
    for (const auto& id : customers) {
      const auto customer = call<data::customer>("crm_get_customer", fmt::format(R"({{"customer_id":"{}"}})", id));
      const auto invoices = call<data::invoice_page>(
          "billing_list_invoices", fmt::format(R"({{"customer_id":"{}","status":"overdue","page_size":100}})", id));
      if (!customer || !invoices) return {};
      auto& sum = owed[customer->account_manager.name];
      for (const auto& i : invoices->invoices) sum += i.amount_due_cents;
    }
    return owed;
  }
};

/// The catalogue a runtime hands programs when it defers this server's schemas out of the prompt:
/// the same tools, marked deferred, so list_tools says so and get_tool_info is the way to them.
class deferred_catalogue final : public psych::tool_catalogue {
 public:
  explicit deferred_catalogue(psych::tool_catalogue& all) : all_(all) {}
  std::vector<psych::binding> offered_now() override {
    auto offered = all_.offered_now();
    for (auto& b : offered) b.deferred = true;
    return offered;
  }

 private:
  psych::tool_catalogue& all_;
};

// The lookup tool of (b) and run_code of (c), as a runtime would show them: psych leaves the
// wording of a tool's definition to the runtime, so these are the example's, written to say what
// a model needs and no more.
constexpr std::string_view lookup_definition =
    R"({"name":"get_tool_info","description":"Returns one deferred tool's description and argument schema. )"
    R"(Call it before the first call of a tool whose schema you have not seen.","input_schema":{"type":"object",)"
    R"("properties":{"name":{"type":"string","description":"The tool's full name"}},"required":["name"]}})";
constexpr std::string_view run_code_definition =
    R"({"name":"run_code","description":"Runs a Python program in a sandbox and returns its value, output and )"
    R"(traceback as data. Top-level await and return are allowed. Every tool you can call is a function of the )"
    R"(program: await call_tool(name, arguments) calls one by its full name and returns its result, await )"
    R"(list_tools(offset) pages through the catalogue (names and descriptions, next_offset), await )"
    R"(get_tool_info(name) returns one tool's input_schema. Only the program and its result enter the )"
    R"(conversation.","input_schema":{"type":"object","properties":{"program":{"type":"string",)"
    R"("description":"Python source"}},"required":["program"]}})";

// The model cannot see the catalogue, so the program searches it for the task's words (exactly one
// tool each), checks the arguments it means to pass against each schema, and only then loops.
constexpr std::string_view program = R"PY(import json
names, offset = [], 0
while offset is not None:
    window = await list_tools(offset=offset)
    names += [t["name"] for t in window["tools"]]
    offset = window["next_offset"]
uses = {"list_tickets": {"status", "priority", "page_size"}, "get_customer": {"customer_id"},
        "list_invoices": {"customer_id", "status", "page_size"}}
tool = {}
for words, arguments in uses.items():
    [tool[words]] = [n for n in names if n.endswith("_" + words)]
    schema = (await get_tool_info(tool[words]))["input_schema"]
    assert arguments <= schema["properties"].keys(), (tool[words], list(schema["properties"]))

async def read(words, **arguments):
    return json.loads((await call_tool(tool[words], arguments))["content"][0]["text"])

page = await read("list_tickets", status="open", priority="urgent", page_size=100)
assert page["next_cursor"] is None, "more than one page of tickets"
owed = {}
for customer in sorted({t["customer_id"] for t in page["tickets"]}):
    manager = (await read("get_customer", customer_id=customer))["account_manager"]["name"]
    invoices = (await read("list_invoices", customer_id=customer, status="overdue", page_size=100))["invoices"]
    owed[manager] = owed.get(manager, 0) + sum(i["amount_due_cents"] for i in invoices)
return owed
)PY";

/// (d): the program of (c) through `psych mcp`, from the client's side, as Claude Code or any MCP
/// client would run it: psych mcp started with this server upstream, its tools/list read, run_code
/// called. What enters the context: psych mcp's tool definitions (run_code's description is made
/// from the catalogue), the program, and the result's text.
struct through_psych_mcp {
  context seen;
  std::optional<owed_by_manager> answer;
  std::string problem;
};

through_psych_mcp run_through_psych_mcp(const std::string& psych, const std::string& script,
                                        const std::filesystem::path& data) {
  through_psych_mcp out;
  auto started = psych::mcp_client::start(
      {.name = "psych",
       .command = {psych, "mcp", "--pool", "0", "--mcp",
                   fmt::format("{}=python3 {} {}", server_name, script, data.string())}});
  if (!started) {
    out.problem = started.error().message();
    return out;
  }
  auto& server = *started.value();
  const auto tools = server.list_tools();
  if (!tools) {
    out.problem = tools.error().message();
    return out;
  }
  std::vector<std::string> shown;
  for (const auto& t : tools.value())
    shown.push_back(psych::protocol::encode_json(data::definition{t.name, t.description, psych::json_text{t.input_schema_json}}));
  out.seen.prefix = json_array(shown).size();
  const auto called = server.call_tool(
      "run_code", fmt::format(R"({{"program":{}}})", psych::protocol::encode_json(std::string(program))), {});
  if (!called) {
    out.problem = called.error().message();
    return out;
  }
  const auto result = psych::protocol::decode_json<data::call_text>(called.value().json);
  if (!result || result.value().content.empty()) {
    out.problem = "run_code answered no text: " + called.value().json;
    return out;
  }
  const auto& payload = result.value().content.front().text;
  out.seen.turns = {program.size() + payload.size()};
  if (const auto decoded = psych::protocol::decode_json<data::valued_answer>(payload)) out.answer = decoded.value().value;
  else out.problem = "the payload has no answer: " + payload;
  return out;
}

double saving(std::uint64_t from, std::uint64_t to) {
  return 100.0 * (1.0 - static_cast<double>(to) / static_cast<double>(from));
}

std::string verdict(const owed_by_manager& found, const owed_by_manager& expected) {
  return found == expected ? "right" : "WRONG";
}

int compare(const std::filesystem::path& dir, const std::string& script, const std::string& psych) {
  const auto all = make_data();
  const auto expected = answer_of(all);
  {
    std::ofstream out(dir / "data.json");
    out << psych::protocol::encode_json(all);
  }
  auto started = psych::mcp_client::start(
      {.name = std::string(server_name), .command = {"python3", script, (dir / "data.json").string()}});
  if (!started) {
    fmt::print(stderr, "catalogue_bytes: {}\n", started.error().message());
    return 1;
  }
  auto& ops = *started.value();
  const auto tools = ops.list_tools();
  if (!tools) {
    fmt::print(stderr, "catalogue_bytes: {}\n", tools.error().message());
    return 1;
  }
  const auto shown = definitions_of(tools.value());
  std::vector<std::string> names;
  for (const auto& [name, definition] : shown) names.push_back(fmt::format(R"("{}__{}")", server_name, name));

  // (a) every definition in the prompt.
  direct_calls all_schemas{.ops = ops};
  all_schemas.seen.prefix = json_array(shown | std::views::values).size();
  const auto answer_a = all_schemas.run();
  // (b) names only, beside the lookup tool; a lookup before each tool's first call.
  direct_calls deferred{.ops = ops, .lookups = &shown};
  deferred.seen.prefix = json_array(names).size() + lookup_definition.size();
  const auto answer_b = deferred.run();
  if (all_schemas.failed || deferred.failed) return 1;

  // (c) one run_code call.
  std::vector<std::unique_ptr<psych::mcp_client>> clients;
  clients.push_back(std::move(started).value());
  auto source = psych::mcp_binding_source::create(std::move(clients)).value();
  deferred_catalogue catalogue(*source);
  auto turn = scripted_model::run_program(catalogue, *source, std::string(server_name), std::string(program),
                                          dir / "run.log");
  if (!turn) {
    fmt::print(stderr, "catalogue_bytes: {}\n", turn.error().message());
    return 1;
  }
  const auto& result = turn.value().result;
  std::optional<owed_by_manager> answer_c;
  if (result.ok() && result.value)
    if (auto decoded = psych::protocol::decode_json<owed_by_manager>(result.value->text)) answer_c = decoded.value();
  const context looped{.prefix = run_code_definition.size(), .turns = {program.size() + turn.value().payload.size()}};

  std::uint64_t schema_bytes = 0;
  for (const auto& [name, definition] : shown) schema_bytes += definition.size();
  fmt::print("catalogue: {} tools, definitions {} bytes in all ({} bytes each on average)\n", shown.size(),
             schema_bytes, schema_bytes / std::max<std::size_t>(shown.size(), 1));
  fmt::print("prompts: (a) {} bytes of definitions, (b) {} bytes of names and the lookup tool's {}, "
             "(c) run_code's {}\n",
             all_schemas.seen.prefix, deferred.seen.prefix, lookup_definition.size(), run_code_definition.size());
  fmt::print("task: overdue invoices per account manager of the customers with an open urgent ticket\n");
  fmt::print("  (a) all schemas + direct calls:   {:>2} turns, {:>7} bytes into the context ({} re-read), {}\n",
             all_schemas.seen.turns.size(), all_schemas.seen.once(), all_schemas.seen.reread(),
             verdict(answer_a, expected));
  fmt::print("  (b) deferred + lookups + calls:   {:>2} turns, {:>7} bytes into the context ({} re-read), {}\n",
             deferred.seen.turns.size(), deferred.seen.once(), deferred.seen.reread(), verdict(answer_b, expected));
  fmt::print("  (c) one run_code program:          1 turn,  {:>7} bytes into the context ({} re-read), {}\n",
             looped.once(), looped.reread(), answer_c ? verdict(*answer_c, expected) : "WRONG");
  fmt::print("      run_code {} bytes, the program {} bytes, the payload {} bytes: {}\n", run_code_definition.size(),
             program.size(), turn.value().payload.size(), turn.value().payload);
  const double vs_a = saving(all_schemas.seen.once(), looped.once());
  const double vs_b = saving(deferred.seen.once(), looped.once());
  fmt::print("  (c) put {:.2f}% fewer bytes into the context than (a), {:.2f}% fewer than (b) (isolation: {})\n", vs_a,
             vs_b, result.isolation ? psych::name_of(*result.isolation) : "none");
  fmt::print("BENCH context_catalogue_all_schemas_bytes {} bytes\n", all_schemas.seen.once());
  fmt::print("BENCH context_catalogue_deferred_bytes {} bytes\n", deferred.seen.once());
  fmt::print("BENCH context_catalogue_program_bytes {} bytes\n", looped.once());
  fmt::print("BENCH context_catalogue_saving_vs_all_schemas {:.2f} %\n", vs_a);
  fmt::print("BENCH context_catalogue_saving_vs_deferred {:.2f} %\n", vs_b);
  fmt::print("BENCH context_catalogue_all_schemas_reread_bytes {} bytes\n", all_schemas.seen.reread());
  fmt::print("BENCH context_catalogue_deferred_reread_bytes {} bytes\n", deferred.seen.reread());
  fmt::print("BENCH context_catalogue_program_reread_bytes {} bytes\n", looped.reread());

  bool through_agrees = true;
  if (!psych.empty()) {
    const auto through = run_through_psych_mcp(psych, script, dir / "data.json");
    through_agrees = through.answer == expected;
    if (!through.problem.empty()) fmt::print(stderr, "catalogue_bytes: psych mcp: {}\n", through.problem);
    fmt::print("  (d) (c) through psych mcp:          1 turn,  {:>7} bytes into the context ({} re-read), {}\n",
               through.seen.once(), through.seen.reread(), through.answer ? verdict(*through.answer, expected) : "WRONG");
    fmt::print("      psych mcp's tools/list {} bytes (run_code's description made from the catalogue)\n",
               through.seen.prefix);
    fmt::print("  (d) put {:.2f}% fewer bytes into the context than (a), {:.2f}% fewer than (b)\n",
               saving(all_schemas.seen.once(), through.seen.once()), saving(deferred.seen.once(), through.seen.once()));
    fmt::print("BENCH context_catalogue_psych_mcp_bytes {} bytes\n", through.seen.once());
    fmt::print("BENCH context_catalogue_psych_mcp_saving_vs_all_schemas {:.2f} %\n",
               saving(all_schemas.seen.once(), through.seen.once()));
  }

  const bool agree = answer_a == expected && answer_b == expected && answer_c == expected && through_agrees;
  if (!agree) fmt::print(stderr, "catalogue_bytes: the three answers do not all match the data's\n");
  if (vs_a < 99.0) fmt::print(stderr, "catalogue_bytes: (c) saves {:.2f}% against (a), short of 99%\n", vs_a);
  return agree && vs_a >= 99.0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string script = argc > 1 ? argv[1] : "examples/context/catalogue_server.py";
  if (::access(script.c_str(), R_OK) != 0) {
    fmt::print(stderr, "catalogue_bytes: {} is missing\n", script);
    return 2;
  }
  char dir_template[] = "/tmp/psych-catalogue-XXXXXX";
  if (!::mkdtemp(dir_template)) return 2;
  const std::filesystem::path dir = dir_template;
  // With psych's path, (d) as well: the same program through `psych mcp`.
  const std::string psych = argc > 2 ? argv[2] : "";
  const int status = compare(dir, std::filesystem::absolute(script).string(), psych);
  std::filesystem::remove_all(dir);
  return status;
}
