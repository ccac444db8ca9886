// Host bindings: a program calls the agent's tools through the runtime's own path, metered per
// execution and per Run, journalled in the Run's log. Every case runs against every backend.
#ifdef PSYCH_CRASH_WORKER_PATH  // the crash case's worker, a POSIX process this one kills (not on Windows)
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "backends.hpp"
#include "invoker.hpp"
#include "psych/host/blob_store.hpp"
#include "psych/host/blocking_invoker.hpp"
#include "psych/host/run_code.hpp"

using namespace psych;
using conformance::for_each_backend;
using conformance::recording_invoker;

extern char** environ;

TEST_CASE("bindings: any name by call_tool, real aliases only, TOOLS sorted, ToolError kinds") {
  for_each_backend([](sandbox& sb, const auto&) {
    recording_invoker invoker;
    const std::vector<psych::binding> offered{{"list_repos", "the real one"}, {"list-repos", "a dashed one"},
                                              {"2fa", ""},  {"class", ""}, {"echo", ""}, {"fails", ""}};
    const auto r = sb.run({.program = R"PY(
out = {"tools": list(TOOLS)}
out["by_name"] = await call_tool("list-repos", {"owner": "psych"})
out["alias"] = await list_repos(owner="psych")
out["aliases"] = sorted(n for n in ("list_repos", "list-repos", "2fa", "class", "echo", "fails") if n in globals())
out["2fa"] = (await call_tool("2fa"))["tool"]
for name in ("nope", "ask_question", "fails"):
    try:
        await call_tool(name, {})
        out[name] = "returned"
    except ToolError as error:
        out[name] = [error.kind, error.tool]
try:
    await call_tool("echo", {"not json": {1, 2}})
except ToolError as error:
    out["unencodable"] = error.kind
return out
)PY",
                           .terms = conformance::terms_for(sb),
                           .bindings = offered,
                           .invoker = &invoker});
    REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
    const auto& v = r.value->text;
    CHECK(v.find(R"("tools":["2fa","class","echo","fails","list-repos","list_repos"])") != std::string::npos);
    CHECK(v.find(R"("by_name":{"tool":"list-repos","arguments":{"owner":"psych"}})") != std::string::npos);
    CHECK(v.find(R"("alias":{"tool":"list_repos","arguments":{"owner":"psych"}})") != std::string::npos);
    // Only usable identifiers that are not keywords get an alias; none is mangled.
    CHECK(v.find(R"("aliases":["echo","fails","list_repos"])") != std::string::npos);
    CHECK(v.find(R"("2fa":"2fa")") != std::string::npos);
    CHECK(v.find(R"("nope":["unknown_tool","nope"])") != std::string::npos);
    CHECK(v.find(R"("ask_question":["excluded_builtin","ask_question"])") != std::string::npos);
    CHECK(v.find(R"("fails":["tool_failed","fails"])") != std::string::npos);
    CHECK(v.find(R"("unencodable":"malformed_call")") != std::string::npos);
    // Refusals never reached the runtime: 4 calls by name or alias, plus the failing tool.
    CHECK(invoker.calls == 4);
  });
}

TEST_CASE("bindings: the excluded built-in's own reason reaches the program") {
  for_each_backend([](sandbox& sb, const auto&) {
    recording_invoker invoker;
    const auto r = sb.run({.program = R"PY(
try:
    await call_tool("delegate", {})
except ToolError as error:
    return str(error)
)PY",
                           .terms = conformance::terms_for(sb),
                           .bindings = {},
                           .invoker = &invoker});
    REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
    CHECK(r.value->text.find("outlive the execution") != std::string::npos);
    CHECK(invoker.calls == 0);
  });
}

TEST_CASE("bindings: a hostile program's malformed call frame is a named violation, and the host goes on") {
  for_each_backend([](sandbox& sb, const conformance::backend_under_test& backend) {
    recording_invoker invoker;
    const auto r = sb.run({.program = conformance::channel_writer(backend) + R"PY(
write_channel(b'{"type":"call","id":"seven","tool":5,"arguments":[]}\n')
import time
time.sleep(5)
)PY",
                           .terms = conformance::terms_for(sb),
                           .bindings = {{"echo", ""}},
                           .invoker = &invoker});
    REQUIRE(r.failure);
    CHECK(r.failure->kind == failure_kind::protocol_violation);
    CHECK(r.failure->message.find("id") != std::string::npos);
    CHECK(r.duration_seconds < 4.0);  // ended by the violation, not by its sleep
    CHECK(invoker.calls == 0);
    // The same sandbox runs the next program normally.
    const auto next = sb.run({.program = "return (await call_tool('echo', {'n': 1}))['arguments']",
                              .terms = conformance::terms_for(sb),
                              .bindings = {{"echo", ""}},
                              .invoker = &invoker});
    REQUIRE_MESSAGE(next.ok(), (next.failure ? next.failure->message : ""));
    CHECK(next.value->text == R"({"n":1})");
  });
}

TEST_CASE("bindings: each per-execution meter runs out with budget_exhausted naming it, and the program goes on") {
  for_each_backend([](sandbox& sb, const auto&) {
    recording_invoker invoker;
    const auto run_with = [&](psych::binding_budget budget, const char* program) {
      return sb.run({.program = program,
                     .terms = conformance::terms_for(sb),
                     .bindings = {{"echo", ""}},
                     .invoker = &invoker,
                     .budget = budget});
    };
    constexpr const char* attempts = R"PY(
out = []
for i in range(5):
    try:
        await call_tool("echo", {"pad": "x" * PAD})
        out.append("ok")
    except ToolError as error:
        out.append(f"{error.kind}: {str(error).split(': ', 2)[2].split(':')[0]}")
return out
)PY";
    const auto with_pad = [&](int pad) {
      std::string text = attempts;
      text.replace(text.find("PAD"), 3, std::to_string(pad));
      return text;
    };
    SUBCASE("calls") {
      const auto r = run_with({.max_calls = 3}, with_pad(1).c_str());
      REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
      CHECK(r.value->text == R"(["ok","ok","ok","budget_exhausted: calls","budget_exhausted: calls"])");
      CHECK(invoker.calls == 3);
    }
    SUBCASE("transfer") {
      // Each echoed result is 78 bytes ({"tool":"echo","arguments":{"pad":"x" * 40}}): two fit in 200.
      const auto r = run_with({.max_transfer_bytes = 200}, with_pad(40).c_str());
      REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
      INFO(r.value->text);
      CHECK(r.value->text.starts_with(R"(["ok","ok","budget_exhausted: transfer")"));
    }
    SUBCASE("arguments over the per-call ceiling never reach the tool") {
      const auto r = run_with({.max_argument_bytes = 64}, with_pad(100).c_str());
      REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
      CHECK(r.value->text.find("argument_too_large: argument_bytes") != std::string::npos);
      CHECK(invoker.calls == 0);
    }
    SUBCASE("a result over the per-call ceiling is refused whole, never truncated") {
      const auto r = run_with({.max_result_bytes = 50}, with_pad(100).c_str());
      REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
      CHECK(r.value->text.find("binding_result_not_paged: result_bytes") != std::string::npos);
    }
  });
}

namespace {

/// A temporary directory for one case's run log, removed with everything in it.
struct scratch_dir {
  std::string path = conformance::make_scratch_directory("psych-bindings-");
  ~scratch_dir() { std::filesystem::remove_all(path); }
};

std::vector<psych::binding> standard_tools() {
  return {{"echo", "answers with its arguments"},
          {"slow", "answers after 300 ms"},
          {"hang", "answers when stopped"},
          {"delete_all", "deletes every record; needs approval"},
          {"forbidden", "the tenant's policy refuses it"},
          {"fails", ""},
          {"big", ""},
          {"timeout", ""},
          {"unknown_outcome", ""},
          {"docs__search", "a deferred MCP tool", R"({"type":"object","properties":{"q":{"type":"string"}}})", true}};
}

code_run open_run(sandbox& sb, tool_catalogue& catalogue, tool_invoker& invoker, run_log& log,
                  binding_budget budget = {}) {
  auto opened = code_run::attempt({.backend = &sb, .catalogue = &catalogue, .invoker = &invoker, .log = &log,
                                   .budget = budget});
  REQUIRE_MESSAGE(opened, (opened ? "" : opened.error().message()));
  return std::move(opened).value();
}

std::vector<call_finished> finished_records(run_log& log) {
  std::vector<call_finished> out;
  const auto records = log.records();
  REQUIRE(records);
  for (const auto& record : records.value())
    if (const auto* finished = std::get_if<call_finished>(&record)) out.push_back(*finished);
  return out;
}

/// One Run with its own file log, opened as a runtime opens an Attempt.
struct journalled_run {
  recording_invoker invoker;
  scratch_dir dir;
  std::unique_ptr<run_log> log;
  conformance::listed_catalogue catalogue;
  std::optional<code_run> run;

  explicit journalled_run(sandbox& sb, binding_budget budget = {}, std::vector<binding> tools = standard_tools())
      : catalogue(std::move(tools)) {
    auto opened = open_file_run_log(dir.path + "/run.log");
    REQUIRE_MESSAGE(opened, (opened ? "" : opened.error().message()));
    log = std::move(opened).value();
    run.emplace(open_run(sb, catalogue, invoker, *log, budget));
  }
};

}  // namespace

TEST_CASE("bindings: list_tools and get_tool_info are callable, bounded, and the way to a deferred schema") {
  for_each_backend([](sandbox& sb, const auto&) {
    recording_invoker invoker;
    std::vector<psych::binding> many = standard_tools();
    for (int i = 0; i < 150; ++i) many.push_back({fmt::format("t{:03}", i), std::string(5000, 'd')});
    const auto r = sb.run({.program = R"PY(
first = await list_tools()
second = await list_tools(offset=first["next_offset"])
info = await get_tool_info("docs__search")
try:
    await get_tool_info("nope")
    missing = "returned"
except ToolError as error:
    missing = error.kind
deferred = [t["name"] for t in first["tools"] + second["tools"] if t["deferred"]]
return {"first": len(first["tools"]), "total": first["total"], "second": len(second["tools"]),
        "next": second["next_offset"], "longest": max(len(t["description"]) for t in first["tools"]),
        "schema": info["input_schema"], "deferred": deferred, "missing": missing}
)PY",
                           .terms = conformance::terms_for(sb),
                           .bindings = many,
                           .invoker = &invoker});
    REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
    const auto& v = r.value->text;
    INFO(v);
    CHECK(v.find(R"("first":100,"total":160,"second":60,"next":null)") != std::string::npos);
    CHECK(v.find(R"("longest":303)") != std::string::npos);  // 300 bytes and an ellipsis
    CHECK(v.find(R"("schema":{"type":"object","properties":{"q":{"type":"string"}}})") != std::string::npos);
    CHECK(v.find(R"("deferred":["docs__search"])") != std::string::npos);
    CHECK(v.find(R"("missing":"unknown_tool")") != std::string::npos);
    CHECK(invoker.calls == 0);  // the host answers these itself
    CHECK(r.bindings_spent.calls == 4);
  });
}

TEST_CASE("bindings: calls gathered under asyncio are in flight together, and answered by id") {
  for_each_backend([](sandbox& sb, const auto&) {
    recording_invoker invoker;
    const auto r = sb.run({.program = R"PY(
import asyncio
replies = await asyncio.gather(*(call_tool("slow", {"i": i}) for i in range(8)), call_tool("echo", {"i": 99}))
return [reply["arguments"]["i"] for reply in replies]
)PY",
                           .terms = conformance::terms_for(sb),
                           .bindings = standard_tools(),
                           .invoker = &invoker});
    REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
    CHECK(r.value->text == "[0,1,2,3,4,5,6,7,99]");
    CHECK(invoker.max_in_flight >= 2);  // a blocking driver would never have two
    CHECK(r.bindings_spent.calls == 9);
  });
}

TEST_CASE("bindings: a call used without await says what to write at the program's line, and is never made") {
  for_each_backend([](sandbox& sb, const auto&) {
    recording_invoker invoker;
    const std::vector<psych::binding> offered{{"lookup_order", ""}};
    constexpr std::string_view await_it = "lookup_order(...) must be awaited: write `await lookup_order(...)`";
    for (const char* header : {"", "import asyncio\n"}) {  // driven by the bootstrap, and under asyncio.run
      const auto r = sb.run({.program = fmt::format("{}x = 1\nr = lookup_order(sku='A')\nreturn r['total']\n", header),
                             .terms = conformance::terms_for(sb),
                             .bindings = offered,
                             .invoker = &invoker});
      REQUIRE(r.failure);
      CHECK(r.failure->kind == failure_kind::exception);
      CHECK_MESSAGE(r.failure->message.find(await_it) != std::string::npos, r.failure->message);
      CHECK(r.failure->line == (*header ? 4 : 3));
      // The traceback is the program's alone: no frame of the bootstrap, no second warning.
      CHECK(r.failure->traceback.find("<program>") != std::string::npos);
      CHECK_MESSAGE(r.failure->traceback.find("bootstrap") == std::string::npos, r.failure->traceback);
      CHECK_MESSAGE(r.stderr_data.empty(), r.stderr_data);
    }
    // Dropped without await: reported in stderr at the line that made it; the tool never ran.
    const auto dropped = sb.run({.program = "lookup_order(sku='A')\nreturn (await lookup_order(sku='B'))['arguments']",
                                 .terms = conformance::terms_for(sb),
                                 .bindings = offered,
                                 .invoker = &invoker});
    REQUIRE_MESSAGE(dropped.ok(), (dropped.failure ? dropped.failure->message : ""));
    CHECK(dropped.value->text == R"({"sku":"B"})");
    CHECK(dropped.stderr_data ==
          "<program>:1: RuntimeWarning: lookup_order(...) was never awaited: write `await lookup_order(...)`; "
          "without await the tool is not called\n");
    CHECK(invoker.calls == 1);
  });
}

TEST_CASE("bindings: a call the program gives up on, or leaves in flight at its end, is stopped on the host") {
  for_each_backend([](sandbox& sb, const auto&) {
    journalled_run journalled(sb);
    auto& [invoker, dir, log, catalogue, run] = journalled;
    SUBCASE("given up: wait_for's timeout sends cancel_call, and the program goes on") {
      const auto r = run->run({.program = R"PY(
import asyncio
try:
    await asyncio.wait_for(call_tool("hang", {}), 0.2)
    gave_up = False
except asyncio.TimeoutError:
    gave_up = True
return [gave_up, (await call_tool("echo", {"after": 1}))["arguments"]]
)PY",
                              .terms = conformance::terms_for(sb)});
      REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
      CHECK(r.value->text == R"([true,{"after":1}])");
    }
    SUBCASE("left in flight: the interpreter ends without waiting, the host stops the tool") {
      const auto r = run->run({.program = R"PY(
import asyncio, os
pending = asyncio.ensure_future(call_tool("hang", {}))
await asyncio.sleep(0.2)
os._exit(0)
)PY",
                              .terms = conformance::terms_for(sb)});
      REQUIRE(r.failure);
      CHECK(r.failure->kind == failure_kind::channel_closed);  // exiting closed the channel before done
    }
    CHECK(invoker.stopped == 1);
    const auto finished = finished_records(*log);
    CHECK(std::ranges::count(finished, call_outcome{tool_error_kind::cancelled}, &call_finished::outcome) == 1);
    CHECK(run->run_spent().value().calls == static_cast<std::uint64_t>(invoker.calls.load()));
  });
}

TEST_CASE("bindings: a destructive tool is refused before it runs; the policy's refusal is `denied`") {
  for_each_backend([](sandbox& sb, const auto&) {
    recording_invoker invoker;
    const auto r = sb.run({.program = R"PY(
out = {}
for name in ("delete_all", "forbidden"):
    try:
        await call_tool(name, {"all": True})
        out[name] = "ran"
    except ToolError as error:
        out[name] = [error.kind, error.tool, str(error)]
return out
)PY",
                           .terms = conformance::terms_for(sb),
                           .bindings = standard_tools(),
                           .invoker = &invoker});
    REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
    const auto& v = r.value->text;
    INFO(v);
    CHECK(v.find(R"("delete_all":["approval_required_in_program","delete_all")") != std::string::npos);
    CHECK(v.find("have the model call it directly") != std::string::npos);
    CHECK(v.find(R"("forbidden":["denied","forbidden")") != std::string::npos);
    CHECK(invoker.deleted == 0);  // the tool's own effect never happened
    CHECK(invoker.calls == 0);
    CHECK(r.bindings_spent.calls == 2);  // refused calls are still spent
  });
}

TEST_CASE("bindings: every ToolError kind a program can meet is reachable, with .kind and .tool") {
  for_each_backend([](sandbox& sb, const auto&) {
    journalled_run journalled(sb, {.max_calls = 13, .max_argument_bytes = 200, .max_result_bytes = 1000});
    auto& [invoker, dir, log, catalogue, run] = journalled;
    const auto r = run->run({.program = R"PY(
import asyncio
kinds = {}
async def attempt(name, arguments):
    try:
        await call_tool(name, arguments)
    except ToolError as error:
        kinds[error.kind] = error.tool
attempts = [("nope", {}), ("gone", {}), ("ask_question", {}), ("forbidden", {}), ("delete_all", {}),
            ("echo", {"pad": "x" * 300}), ("big", {"size": 5000}), ("fails", {}), ("timeout", {}),
            ("unknown_outcome", {})]
for name, arguments in attempts:
    await attempt(name, arguments)
try:
    await call_tool("echo", [1])
except ToolError as error:
    kinds[error.kind] = error.tool
try:
    await asyncio.wait_for(call_tool("hang", {}), 0.3)
except asyncio.TimeoutError:
    pass
for i in range(7):
    await attempt("echo", {})
return kinds
)PY",
                            .terms = conformance::terms_for(sb),
                            .bindings = std::vector<std::string>{"nope_not_listed", "gone", "echo", "big", "fails",
                                                                 "timeout", "unknown_outcome", "forbidden",
                                                                 "delete_all", "hang"}});
    REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
    const auto& v = r.value->text;
    INFO(v);
    for (const char* expected :
         {R"("unknown_tool":"nope")", R"("unavailable_binding":"gone")", R"("excluded_builtin":"ask_question")",
          R"("denied":"forbidden")", R"("approval_required_in_program":"delete_all")",
          R"("argument_too_large":"echo")", R"("binding_result_not_paged":"big")", R"("tool_failed":"fails")",
          R"("timeout":"timeout")", R"("unknown_outcome":"unknown_outcome")", R"("malformed_call":"echo")",
          R"("budget_exhausted":"echo")"})
      CHECK(v.find(expected) != std::string::npos);
    // `cancelled` is what the host records for the call the program gave up on; the program itself
    // stopped waiting, so it meets asyncio's TimeoutError instead. binding_result_too_large is
    // reached through a result handle's window (conformance/test_output.cpp, result handles).
    CHECK(std::ranges::count(finished_records(*log), call_outcome{tool_error_kind::cancelled}, &call_finished::outcome) == 1);
    CHECK(r.unavailable_bindings == std::vector<std::string>{"gone", "nope_not_listed"});
  });
}

TEST_CASE("bindings: a withdrawn tool stops working at the next turn boundary, and is never replaced") {
  for_each_backend([](sandbox& sb, const auto&) {
    journalled_run journalled(sb, {}, {{"lookup", ""}, {"lookup_v2", "a lookalike"}, {"echo", ""}});
    auto& [invoker, dir, log, catalogue, run] = journalled;
    const char* program = R"PY(
try:
    return [list(TOOLS), (await call_tool("lookup", {}))["tool"]]
except ToolError as error:
    return [list(TOOLS), error.kind]
)PY";
    const auto listed = std::vector<std::string>{"lookup", "echo"};
    const auto before = run->run({.program = program, .terms = conformance::terms_for(sb), .bindings = listed});
    REQUIRE_MESSAGE(before.ok(), (before.failure ? before.failure->message : ""));
    CHECK(before.value->text == R"([["echo","lookup"],"lookup"])");
    catalogue.withdraw("lookup");  // the tenant's policy, between turns
    const auto after = run->run({.program = program, .terms = conformance::terms_for(sb), .bindings = listed});
    REQUIRE_MESSAGE(after.ok(), (after.failure ? after.failure->message : ""));
    CHECK(after.value->text == R"([["echo"],"unavailable_binding"])");
    CHECK(after.unavailable_bindings == std::vector<std::string>{"lookup"});
    const auto everything = run->run({.program = program, .terms = conformance::terms_for(sb)});
    REQUIRE_MESSAGE(everything.ok(), (everything.failure ? everything.failure->message : ""));
    CHECK(everything.value->text == R"([["echo","lookup_v2"],"unknown_tool"])");
    CHECK(everything.unavailable_bindings.empty());
  });
}

TEST_CASE("bindings: the per-Run allowance survives a new execution; preserved bytes are metered") {
  for_each_backend([](sandbox& sb, const auto&) {
    recording_invoker invoker;
    scratch_dir dir;
    auto log = open_file_run_log(dir.path + "/run.log");
    REQUIRE(log);
    conformance::listed_catalogue catalogue(standard_tools());
    const char* three_calls = R"PY(
out = []
for i in range(3):
    try:
        out.append((await call_tool("echo", {"i": i}))["arguments"]["i"])
    except ToolError as error:
        out.append(f"{error.kind}: {str(error).split(': ', 2)[2]}")
return out
)PY";
    SUBCASE("calls") {
      auto run = open_run(sb, catalogue, invoker, *log.value(), {.max_run_calls = 4});
      const auto first = run.run({.program = three_calls, .terms = conformance::terms_for(sb)});
      REQUIRE_MESSAGE(first.ok(), (first.failure ? first.failure->message : ""));
      CHECK(first.value->text == "[0,1,2]");
      const auto second = run.run({.program = three_calls, .terms = conformance::terms_for(sb)});
      REQUIRE_MESSAGE(second.ok(), (second.failure ? second.failure->message : ""));
      CHECK(second.value->text ==
            R"([0,"budget_exhausted: calls: 4 of 4 spent in this Run","budget_exhausted: calls: 4 of 4 spent in this Run"])");
      // A fresh Attempt counts from the log, not from memory.
      auto reopened = open_run(sb, catalogue, invoker, *log.value(), {.max_run_calls = 4});
      CHECK(reopened.run_spent().value().calls == 4);
    }
    SUBCASE("the model's direct calls are in the same log and spend the same Run allowance") {
      // The runtime journals a direct call as a program's, without an execution id.
      REQUIRE(log.value()->append(call_started{.call_id = "direct-1", .tool = "echo", .argument_bytes = 2}));
      REQUIRE(log.value()->append(call_finished{.call_id = "direct-1", .outcome = call_outcome::ok(), .produced = 10}));
      auto run = open_run(sb, catalogue, invoker, *log.value(), {.max_run_calls = 2});
      CHECK(run.unknown_calls().empty());
      const auto r = run.run({.program = three_calls, .terms = conformance::terms_for(sb)});
      REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
      CHECK(r.value->text.starts_with(R"([0,"budget_exhausted: calls: 2 of 2 spent in this Run")"));
      CHECK(run.run_spent().value().calls == 2);
      CHECK(run.run_spent().value().produced == 10 + 35);
    }
    SUBCASE("preserved: the recording of each result counts, per execution") {
      auto run = open_run(sb, catalogue, invoker, *log.value(), {.max_preserved_bytes = 70});
      const auto r = run.run({.program = three_calls, .terms = conformance::terms_for(sb)});
      REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
      INFO(r.value->text);
      // Each echo is 35 bytes: two are kept, the third would pass 70.
      CHECK(r.value->text.starts_with(R"([0,1,"budget_exhausted: preserved: 70 of 70 spent in this execution")"));
      CHECK(r.bindings_spent.preserved == 70);
      CHECK(r.bindings_spent.produced == 105);  // made, whether or not it was received
    }
    SUBCASE("preserved: an execution's preserved stdout spends the Run's meter, counted from the log") {
      auto blobs = open_directory_blob_store(dir.path + "/blobs");
      REQUIRE(blobs);
      const binding_budget budget{.max_result_bytes = 1000, .max_run_preserved_bytes = 25000};
      auto opened = code_run::attempt({.backend = &sb, .catalogue = &catalogue, .invoker = &invoker,
                                       .log = log.value().get(), .budget = budget, .blobs = blobs.value().get()});
      REQUIRE_MESSAGE(opened, (opened ? "" : opened.error().message()));
      auto run = std::move(opened).value();
      auto terms = conformance::terms_for(sb);
      terms.output.preview_bytes = 100;
      const auto stdout_of = [](const sandbox_result& r) {
        return *std::ranges::find(r.attachments, "stdout", &result_attachment::name);
      };

      const auto first = run.run({.program = "print('x' * 19999)", .terms = terms});
      REQUIRE_MESSAGE(first.ok(), (first.failure ? first.failure->message : ""));
      CHECK(stdout_of(first).location == attachment_location::blob);
      CHECK(first.bindings_spent.preserved == 20000);
      CHECK(run.run_spent().value().preserved == 20000);

      // The next execution of the Run: a result handle for 6002 bytes, and 20000 bytes of its own
      // stdout, would each pass the 25000 the Run may keep.
      const auto second = run.run({.program = R"PY(
print('y' * 19999)
try:
    await call_tool("big", {"size": 6000})
    return "handed over"
except ToolError as error:
    return f"{error.kind}: {str(error).split(': ', 2)[2]}"
)PY",
                                   .terms = terms});
      REQUIRE_MESSAGE(second.ok(), (second.failure ? second.failure->message : ""));
      CHECK(second.value->text == R"("budget_exhausted: preserved: 20000 of 25000 spent in this Run")");
      CHECK(stdout_of(second).location == attachment_location::preview_only);
      CHECK(std::ranges::find(second.problems,
                              "stdout: not preserved: the budget has no room for its 20000 bytes (preserved: 20000 "
                              "of 25000 spent in this Run)") != second.problems.end());
      CHECK(second.bindings_spent.preserved == 0);

      // A fresh open of the log (a new worker) counts the same.
      log.value().reset();
      auto reopened = open_file_run_log(dir.path + "/run.log");
      REQUIRE(reopened);
      CHECK(tally(reopened.value()->records().value()).spent.preserved == 20000);
    }
  });
}

#ifdef PSYCH_CRASH_WORKER_PATH
TEST_CASE("bindings: a worker killed mid-call leaves the call UNKNOWN; the next Attempt counts it and never re-runs it") {
  // Not on the pooled backend: the worker builds its own sandbox by backend name, without a pool,
  // so it would repeat linux-isolated's case, and the pool's launchers, children of this process,
  // would meet the case's waitpid(-1).
  const auto unpooled = [](const conformance::backend_under_test& backend) { return !conformance::pooled(backend); };
  for_each_backend(unpooled, [](sandbox& sb, const conformance::backend_under_test& backend) {
    scratch_dir dir;
    const std::string log_path = dir.path + "/run.log", marker = dir.path + "/in-call";
    const std::string temp = dir.path + "/temp";
    std::filesystem::create_directory(temp);
    ::chmod(temp.c_str(), 0711);
    std::vector<std::string> args{PSYCH_CRASH_WORKER_PATH, backend.options.backend.value(), log_path, marker, temp};
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    // The worker's launcher and sandbox die with it (parent-death signals) and come to us, not to
    // a pid 1 that may never reap them: nothing of the case is left behind, zombies included.
    REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0);
    pid_t worker = 0;
    REQUIRE(::posix_spawn(&worker, argv[0], nullptr, nullptr, argv.data(), environ) == 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!std::filesystem::exists(marker) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const bool reached = std::filesystem::exists(marker);
    ::kill(worker, SIGKILL);  // ours, by pid: the worker is mid-call
    int status = 0;
    ::waitpid(worker, &status, 0);
    // No execution of this process runs now, so every child left is the worker's orphan.
    bool orphans_reaped = false;
    for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
         !orphans_reaped && std::chrono::steady_clock::now() < until;) {
      int ignored = 0;
      const pid_t reaped = ::waitpid(-1, &ignored, WNOHANG);
      orphans_reaped = reaped < 0 && errno == ECHILD;
      if (reaped == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
    CHECK(orphans_reaped);
    REQUIRE(reached);
    CHECK(WIFSIGNALED(status));

    // A fresh process's view of the log: the call is spent, and has no outcome.
    recording_invoker invoker;
    conformance::listed_catalogue catalogue(standard_tools());
    auto log = open_file_run_log(log_path);
    REQUIRE_MESSAGE(log, (log ? "" : log.error().message()));
    auto run = open_run(sb, catalogue, invoker, *log.value(), {.max_run_calls = 2});
    REQUIRE(run.unknown_calls().size() == 1);
    CHECK(run.unknown_calls().front().tool == "deaf");
    CHECK(run.run_spent().value().calls == 1);
    const auto next = run.run({.program = conformance::echo_calls_program(2), .terms = conformance::terms_for(sb)});
    REQUIRE_MESSAGE(next.ok(), (next.failure ? next.failure->message : ""));
    CHECK(next.value->text == R"([0,"budget_exhausted"])");
    CHECK(invoker.calls == 1);  // the deaf call was not re-run
    const auto finished = finished_records(*log.value());
    CHECK(std::ranges::count(finished, call_outcome{tool_error_kind::unknown_outcome}, &call_finished::outcome) == 1);
    // The killed worker's execution directories are its own temp root's; nothing else is left.
    std::filesystem::remove_all(temp);
  });
}
#endif

TEST_CASE("bindings: blocking tools on the invoker's own pool; the wall clock holds while one blocks") {
  for_each_backend([](sandbox& sb, const auto&) {
    std::atomic<int> running{0}, most{0}, stopped{0};
    blocking_invoker invoker(
        [](const tool_call&) { return call_permission::allow(); },
        [&](const owned_tool_call& call, std::stop_token stop) {
          const int now = ++running;
          for (int seen = most; now > seen && !most.compare_exchange_weak(seen, now);) {
          }
          std::mutex m;
          std::condition_variable_any woken;
          std::unique_lock held(m);
          const auto limit = call.tool == "sleepy" ? std::chrono::milliseconds(200) : std::chrono::hours(1);
          woken.wait_for(held, stop, limit, [] { return false; });
          --running;
          if (stop.stop_requested()) {
            ++stopped;
            return tool_outcome::error(tool_error_kind::cancelled, "stopped");
          }
          return tool_outcome::value(call.arguments_json);
        },
        4);
    const std::vector<binding> tools{{"sleepy", ""}, {"blocks", ""}};
    const auto gathered = sb.run({.program = R"PY(
import asyncio
return [r["i"] for r in await asyncio.gather(*(call_tool("sleepy", {"i": i}) for i in range(4)))]
)PY",
                                  .terms = conformance::terms_for(sb),
                                  .bindings = tools,
                                  .invoker = &invoker});
    REQUIRE_MESSAGE(gathered.ok(), (gathered.failure ? gathered.failure->message : ""));
    CHECK(gathered.value->text == "[0,1,2,3]");
    CHECK(most >= 2);
    const auto blocked = sb.run({.program = "await call_tool('blocks', {})",
                                 .terms = conformance::terms_for(sb, {.wall_seconds = 1.0}),
                                 .bindings = tools,
                                 .invoker = &invoker});
    REQUIRE(blocked.failure);
    CHECK(blocked.failure->kind == failure_kind::timeout);
    CHECK(blocked.duration_seconds < 5.0);
    CHECK(stopped == 1);  // the host asked the tool to stop when the execution ended
  });
}
