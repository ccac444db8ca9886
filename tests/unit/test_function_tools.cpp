// C++ functions as tools: the generated schema, the strict decode of a model's arguments, the
// catalogue-and-invoker object, several sources as one catalogue, and the publish check.
#include <doctest/doctest.h>

#include <array>
#include <future>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <boost/hana/adapt_struct.hpp>

#include "psych/host/binding_sources.hpp"
#include "psych/host/function_tools.hpp"
#include "psych/host/runtime.hpp"
#include "psych/protocol/json_schema.hpp"

namespace tools_test {

enum class priority { low, high };

struct line_item {
  std::string sku;
  unsigned quantity = 1;
  static constexpr std::array<std::string_view, 1> required_members{"sku"};
};

struct order_query {
  std::string customer;
  std::vector<line_item> items;
  std::optional<priority> urgency;
  std::map<std::string, double> discounts;
  static constexpr std::array<std::string_view, 2> required_members{"customer", "items"};
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 1> member_descriptions{
      {{"customer", "the customer's id"}}};
};

struct order_total {
  std::string customer;
  double total = 0;
};

}  // namespace tools_test

namespace psych {  // a user's enum is named inside psych, where enum_names lives
PSYCH_ENUM_NAMES(tools_test::priority, "low", "high");
}  // namespace psych
BOOST_HANA_ADAPT_STRUCT(tools_test::line_item, sku, quantity);
BOOST_HANA_ADAPT_STRUCT(tools_test::order_query, customer, items, urgency, discounts);
BOOST_HANA_ADAPT_STRUCT(tools_test::order_total, customer, total);

using namespace psych;
using namespace tools_test;

namespace {

/// The typed tool the cases call: 2.5 per unit, and a tool error for an unknown customer.
function_tool order_tool() {
  return typed_tool<order_query>("order_total", "An order's total",
                                 [](const order_query& query, std::stop_token) -> tool_answer<order_total> {
                                   if (query.customer == "nobody") return tool_failed("no customer nobody");
                                   if (query.customer == "thrower") throw std::runtime_error("the ledger is locked");
                                   double total = 0;
                                   for (const auto& item : query.items) total += 2.5 * item.quantity;
                                   return order_total{query.customer, total};
                                 });
}

tool_outcome call(tool_invoker& invoker, std::string_view tool, std::string_view arguments) {
  std::promise<tool_outcome> answered;
  invoker.invoke({.call_id = "c1", .execution_id = "e1", .tool = tool, .arguments_json = arguments}, {},
                 [&](tool_outcome outcome) { answered.set_value(std::move(outcome)); });
  return answered.get_future().get();
}

}  // namespace

TEST_CASE("json_schema: generated from the struct the arguments are decoded into") {
  CHECK(protocol::json_schema<order_query>() ==
        R"({"type":"object","properties":{)"
        R"("customer":{"description":"the customer's id","type":"string"},)"
        R"("items":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"},)"
        R"("quantity":{"type":"integer","minimum":0}},"required":["sku"],"additionalProperties":false}},)"
        R"("urgency":{"type":"string","enum":["low","high"]},)"
        R"("discounts":{"type":"object","additionalProperties":{"type":"number"}}},)"
        R"("required":["customer","items"],"additionalProperties":false})");
  CHECK(protocol::json_schema<json_text>() == "{}");
  CHECK(protocol::json_schema<std::array<bool, 2>>() == R"({"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":2})");
}

TEST_CASE("decode_json_strict: a member the struct lacks is named, at any depth; decode_json still ignores it") {
  const auto top = protocol::decode_json_strict<order_query>(R"({"customer":"c","items":[],"custmer":"x"})");
  REQUIRE_FALSE(top);
  CHECK(top.error().kind == error_kind::frame_unknown_member);
  CHECK(top.error().detail == "custmer: no such member (the members are: customer, items, urgency, discounts)");
  const auto deep = protocol::decode_json_strict<order_query>(R"({"customer":"c","items":[{"sku":"a","qty":2}]})");
  REQUIRE_FALSE(deep);
  CHECK(deep.error().detail == "items[0].qty: no such member (the members are: sku, quantity)");
  CHECK(protocol::decode_json<order_query>(R"({"customer":"c","items":[],"custmer":"x"})"));
}

TEST_CASE("decode_json_strict: a misspelt member is named beside the required one it left missing") {
  const auto misspelt = protocol::decode_json_strict<line_item>(R"({"skus":"A","quantity":2})");
  REQUIRE_FALSE(misspelt);
  CHECK(misspelt.error().kind == error_kind::frame_missing_member);
  CHECK(misspelt.error().detail ==
        "sku: required member is missing; given instead: skus (the members are: sku, quantity)");
  const auto missing = protocol::decode_json_strict<line_item>(R"({"quantity":2})");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().detail == "sku: required member is missing");
  // decode_json ignores members it does not know, so it does not name them either.
  CHECK(protocol::decode_json<line_item>(R"({"skus":"A"})").error().detail == "sku: required member is missing");
}

TEST_CASE("function_tools: a bad entry is refused when the object is made") {
  const auto refused = [](std::vector<function_tool> tools) {
    auto made = function_tools::create(std::move(tools));
    REQUIRE_FALSE(made);
    CHECK(made.error().kind == error_kind::invalid_argument);
    return made.error().detail;
  };
  auto unnamed = order_tool();
  unnamed.name.clear();
  CHECK(refused({unnamed}).find("is empty or holds") != std::string::npos);
  auto addressed = order_tool();
  addressed.name = "fs__read";
  CHECK(refused({addressed}).find("\"fs__read\"") != std::string::npos);
  CHECK(refused({order_tool(), order_tool()}) == "function tool \"order_total\" is given twice");
  auto schema = order_tool();
  schema.input_schema_json = "{not json";
  CHECK(refused({schema}).find("its input schema is not JSON") != std::string::npos);
  CHECK(refused({function_tool{.name = "nothing"}}) == "function tool \"nothing\" has no function");
}

TEST_CASE("function_tools: one object is the catalogue and the invoker; every outcome is data") {
  auto tools = function_tools::create({order_tool(),
                                       function_tool{.name = "echo",
                                                     .description = "Its arguments",
                                                     .call = [](const json_text& arguments, std::stop_token) {
                                                       return tool_answer<json_text>(arguments);
                                                     }},
                                       function_tool{.name = "broken",
                                                     .call = [](const json_text&, std::stop_token) {
                                                       return tool_answer<json_text>(json_text{"{oops"});
                                                     }},
                                       function_tool{.name = "drop_table",
                                                     .call = [](const json_text&, std::stop_token) {
                                                       return tool_answer<json_text>(json_text{"true"});
                                                     },
                                                     .requires_approval = true}})
                   .value();
  const auto offered = tools->offered_now();
  REQUIRE(offered.size() == 4);
  CHECK(offered[0].name == "broken");  // sorted by name
  CHECK(offered[3].name == "order_total");
  CHECK(offered[3].input_schema_json == protocol::json_schema<order_query>());
  CHECK(offered[1].input_schema_json == R"({"type":"object"})");

  SUBCASE("a value, encoded by the codec, computed on a thread of the pool") {
    const auto caller = std::this_thread::get_id();
    std::promise<std::thread::id> ran_on;
    tools->invoke({.call_id = "c", .execution_id = "e", .tool = "order_total",
                   .arguments_json = R"({"customer":"ada","items":[{"sku":"a","quantity":2},{"sku":"b"}]})"},
                  {}, [&](tool_outcome outcome) {
                    CHECK(outcome.ok);
                    CHECK(outcome.value_json == R"({"customer":"ada","total":7.5})");
                    ran_on.set_value(std::this_thread::get_id());
                  });
    CHECK(ran_on.get_future().get() != caller);
  }
  SUBCASE("a misspelt argument is a malformed call that names the arguments there are") {
    const auto outcome = call(*tools, "order_total", R"({"customer":"ada","items":[],"urgncy":"high"})");
    CHECK_FALSE(outcome.ok);
    CHECK(outcome.kind == tool_error_kind::malformed_call);
    CHECK(outcome.message == "the arguments do not fit: frame_unknown_member: urgncy: no such member (the members are: "
                             "customer, items, urgency, discounts)");
  }
  SUBCASE("a missing or mistyped argument is named by its path") {
    CHECK(call(*tools, "order_total", R"({"customer":"ada"})").message.find("items: required member is missing") !=
          std::string::npos);
    CHECK(call(*tools, "order_total", R"({"customer":"ada","items":[{"sku":"a","quantity":-1}]})")
              .message.find("items[0].quantity") != std::string::npos);
  }
  SUBCASE("arguments that are not one JSON object") {
    for (const char* arguments : {"[1]", "3", "{\"a\":", ""}) {
      CAPTURE(arguments);
      const auto outcome = call(*tools, "echo", arguments);
      CHECK(outcome.kind == tool_error_kind::malformed_call);
      CHECK(outcome.message == "echo: the arguments must be one JSON object");
    }
  }
  SUBCASE("the tool's own error, a thrown exception, an answer that is not JSON, an unknown name") {
    const auto failed = call(*tools, "order_total", R"({"customer":"nobody","items":[]})");
    CHECK(failed.kind == tool_error_kind::tool_failed);
    CHECK(failed.message == "no customer nobody");
    const auto thrown = call(*tools, "order_total", R"({"customer":"thrower","items":[]})");
    CHECK(thrown.kind == tool_error_kind::tool_failed);
    CHECK(thrown.message == "the ledger is locked");
    const auto broken = call(*tools, "broken", "{}");
    CHECK(broken.kind == tool_error_kind::tool_failed);
    CHECK(broken.message == "broken answered something that is not one JSON value");
    const auto unknown = call(*tools, "order", "{}");
    CHECK(unknown.kind == tool_error_kind::unknown_tool);
  }
  SUBCASE("a tool that needs approval is refused in a program, and runs when called directly") {
    const auto permission = tools->permit({.tool = "drop_table", .arguments_json = "{}"});
    CHECK(permission.decision == call_permission::verdict::needs_approval);
    CHECK(tools->permit({.tool = "echo", .arguments_json = "{}"}).decision == call_permission::verdict::allowed);
    const auto direct = tools->call_now("drop_table", "{}");
    CHECK(direct.ok);
    CHECK(direct.value_json == "true");
  }
}

namespace {

/// A catalogue whose offer the test changes between reads; every call answers with its label.
class labelled_source final : public tool_catalogue, public tool_invoker {
 public:
  explicit labelled_source(std::string label) : label_(std::move(label)) {}
  std::vector<std::string> names;
  std::vector<binding> offered_now() override {
    std::vector<binding> out;
    for (const auto& name : names) out.push_back({.name = name});
    return out;
  }
  call_permission permit(const tool_call&) override { return call_permission::allow(); }
  void invoke(const tool_call&, std::stop_token, std::function<void(tool_outcome)> done) override {
    done(tool_outcome::value("\"" + label_ + "\""));
  }

 private:
  std::string label_;
};

}  // namespace

TEST_CASE("binding_sources: several sources as one catalogue; a name two of them offer is offered by neither") {
  labelled_source functions("functions"), mcp("mcp");
  functions.names = {"lookup", "total"};
  mcp.names = {"docs__search", "lookup"};
  binding_sources sources({binding_source::of(functions, "functions"), binding_source::of(mcp, "mcp")});
  const auto offered = sources.offered_now();
  std::vector<std::string> names;
  for (const auto& b : offered) names.push_back(b.name);
  CHECK(names == std::vector<std::string>{"docs__search", "total"});
  CHECK(sources.conflicts() == std::vector<std::string>{"lookup (functions, mcp)"});
  CHECK(call(sources, "total", "{}").value_json == "\"functions\"");
  CHECK(call(sources, "docs__search", "{}").value_json == "\"mcp\"");
  CHECK(call(sources, "lookup", "{}").kind == tool_error_kind::unknown_tool);
  CHECK(sources.permit({.tool = "lookup"}).decision == call_permission::verdict::denied);

  mcp.names = {"docs__search"};  // the server withdrew its lookup: the conflict is gone
  (void)sources.offered_now();
  CHECK(sources.conflicts().empty());
  CHECK(call(sources, "lookup", "{}").value_json == "\"functions\"");
}

namespace {

class idle_sandbox final : public sandbox {
 public:
  backend_offer offer() const override { return {.ready = false, .problems = {"not used"}}; }
  description describe() override { return {.ready = false, .problems = {"not used"}}; }
  sandbox_result run(const run_request&, std::stop_token) override { return {}; }
};

}  // namespace

TEST_CASE("publish: a granted tool the runtime's catalogue lacks is a publish error naming it") {
  auto tools = function_tools::create({order_tool()}).value();
  runtime_setup setup{.single = std::make_shared<idle_sandbox>(), .connected_servers = {"docs"}, .catalogue = tools.get(),
                      .invoker = tools.get()};
  const agent_spec spec{.name = "clerk",
                        .tools = {{.name = "order_total"}, {.name = "refund"}, {.name = "docs__search"}},
                        .code = code_execution{}};
  const auto refused = runtime::create(setup).value().publish(spec);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message() ==
        "invalid_argument: the spec grants tool \"refund\", and the runtime's catalogue has no tool of that name");

  auto known = spec;
  known.tools.erase(known.tools.begin() + 1);  // docs__search is a connected server's: never checked at publish
  CHECK(runtime::create(setup).value().publish(known));

  setup.tools_known_at_publish = false;  // tools registered later: checked at run time instead
  CHECK(runtime::create(setup).value().publish(spec));
}
