// The runtime face: profiles, publishing an agent spec, the Attempt, and run_code under the
// four-way intersection, with every refusal returned as data. Every backend.
#include <filesystem>

#include "backends.hpp"
#include "invoker.hpp"
#include "psych/host/runtime.hpp"

using namespace psych;

namespace {

std::shared_ptr<sandbox> shared_backend(const conformance::backend_under_test& backend) {
  auto made = conformance::make_sandbox(backend);
  REQUIRE_MESSAGE(made, (made ? "" : made.error().message()));
  return std::shared_ptr<sandbox>(std::move(made).value());
}

agent_spec analyst(std::optional<code_execution> code = code_execution{}) {
  return {.name = "analyst",
          .model = {.model = "gpt-5"},
          .tools = {{.kind = tool_kind::code, .name = "lookup_order"}},
          .code = std::move(code)};
}

/// A backend whose describe() says it is not ready: run_code must refuse, as data.
class unready_sandbox final : public sandbox {
 public:
  backend_offer offer() const override { return {.ready = false, .problems = {"the launcher is missing"}}; }
  description describe() override { return {.ready = false, .problems = {"the launcher is missing"}}; }
  sandbox_result run(const run_request&, std::stop_token) override {
    FAIL("a backend that is not ready must never be asked to run a program");
    return {};
  }
};

/// Python that sets `cpu` and `memory` to the CPU-seconds and memory caps the child runs under, as
/// it reads them itself: its rlimits on POSIX; on Windows its Job Object's limits, with the call
/// and layout the bootstrap's read_job uses (QueryInformationJobObject on no handle: its own job),
/// written out here rather than borrowed from the bootstrap, whose read-back is part of what grades.
std::string read_own_limits(const conformance::backend_under_test& backend) {
  if (!conformance::on_windows(backend))
    return "import resource\n"
           "cpu, memory = resource.getrlimit(resource.RLIMIT_CPU)[0], resource.getrlimit(resource.RLIMIT_AS)[0]\n";
  return R"PY(import ctypes
class Basic(ctypes.Structure):
    _fields_ = [("PerProcessUserTimeLimit", ctypes.c_int64), ("PerJobUserTimeLimit", ctypes.c_int64),
                ("LimitFlags", ctypes.c_uint32), ("MinimumWorkingSetSize", ctypes.c_size_t),
                ("MaximumWorkingSetSize", ctypes.c_size_t), ("ActiveProcessLimit", ctypes.c_uint32),
                ("Affinity", ctypes.c_size_t), ("PriorityClass", ctypes.c_uint32), ("SchedulingClass", ctypes.c_uint32)]
class Extended(ctypes.Structure):
    _fields_ = [("Basic", Basic), ("Io", ctypes.c_uint64 * 6), ("ProcessMemoryLimit", ctypes.c_size_t),
                ("JobMemoryLimit", ctypes.c_size_t), ("PeakProcessMemoryUsed", ctypes.c_size_t),
                ("PeakJobMemoryUsed", ctypes.c_size_t)]
job = Extended()
if not ctypes.windll.kernel32.QueryInformationJobObject(None, 9, ctypes.byref(job), ctypes.sizeof(job), None):
    raise OSError("QueryInformationJobObject refused to read this process's job")
cpu, memory = job.Basic.PerJobUserTimeLimit // 10**7, job.JobMemoryLimit
)PY";
}

struct scratch_log {
  std::string dir = conformance::make_scratch_directory("psych-runtime-");
  std::unique_ptr<run_log> log = open_file_run_log(dir + "/run.log").value();
  ~scratch_log() {
    log.reset();  // first: Windows removes no file that is still open
    std::filesystem::remove_all(dir);
  }
};

}  // namespace

TEST_CASE("runtime: publishing checks the spec, and names what is wrong") {
  conformance::for_each_backend([](sandbox&, const auto& backend) {
    auto rt = runtime::create({.single = shared_backend(backend), .connected_servers = {"docs"}}).value();
    SUBCASE("run_code is reserved") {
      auto spec = analyst();
      spec.tools.push_back({.name = "run_code"});
      const auto published = rt.publish(spec);
      REQUIRE_FALSE(published);
      CHECK(published.error().message().find("run_code is a reserved tool name") != std::string::npos);
    }
    SUBCASE("a binding the agent does not hold") {
      const auto published = rt.publish(analyst(code_execution{.bindings = std::vector<std::string>{"delete_db"}}));
      REQUIRE_FALSE(published);
      CHECK(published.error().message().find("binding \"delete_db\" is neither") != std::string::npos);
    }
    SUBCASE("an excluded built-in is not a binding either") {
      const auto published = rt.publish(analyst(code_execution{.bindings = std::vector<std::string>{"ask_question"}}));
      REQUIRE_FALSE(published);
    }
    SUBCASE("an unknown profile, when the runtime knows its profiles") {
      const auto published = rt.publish(analyst(code_execution{.profile = "gpu"}));
      REQUIRE_FALSE(published);
      CHECK(published.error().message().find("profile \"gpu\"") != std::string::npos);
    }
    SUBCASE("granted tools, callable built-ins and a connected server's tools are bindable") {
      const auto published = rt.publish(analyst(code_execution{
          .bindings = std::vector<std::string>{"lookup_order", "list_tools", "docs__list-repos"}}));
      REQUIRE_MESSAGE(published, (published ? "" : published.error().message()));
    }
  });
}

TEST_CASE("runtime: the Version hash is stable, and changes when code_execution does") {
  auto rt = runtime::create({.single = std::make_shared<unready_sandbox>()}).value();
  const auto first = rt.publish(analyst()).value();
  CHECK(first.hash == rt.publish(analyst()).value().hash);
  // Across processes and builds: the canonical JSON's SHA-256, pinned.
  CHECK(first.hash == "e7a8b996a856cab847f25f8bd63a3a0bff5f2bad2636a36eed575c27e88b9026");
  CHECK(rt.publish(analyst(std::nullopt)).value().hash != first.hash);
  CHECK(rt.publish(analyst(code_execution{.limits = {.wall_seconds = 5.0}})).value().hash != first.hash);
  CHECK(rt.publish(analyst(code_execution{.bindings = std::vector<std::string>{}})).value().hash != first.hash);
}

TEST_CASE("runtime: run_code is shown only to an agent whose spec has code execution") {
  auto rt = runtime::create({.single = std::make_shared<unready_sandbox>()}).value();
  scratch_log log;
  auto plain = rt.start_attempt(rt.publish(analyst(std::nullopt)).value(), *log.log, "t").value();
  CHECK(plain.tool_names() == std::vector<std::string>{"lookup_order"});
  CHECK_FALSE(plain.run_code("return 1"));
  auto coder = rt.start_attempt(rt.publish(analyst()).value(), *log.log, "t").value();
  CHECK(coder.tool_names() == std::vector<std::string>{"lookup_order", "run_code"});
}

TEST_CASE("runtime: each refusal comes back as data, and the agent keeps its other tools") {
  conformance::for_each_backend([](sandbox&, const auto& backend) {
    auto rt = runtime::create({.profiles = {{.name = "default", .backend = shared_backend(backend)},
                                            {.name = "broken", .backend = std::make_shared<unready_sandbox>()}}})
                  .value();
    scratch_log log;
    const auto refusal_of = [&](code_execution code) {
      auto attempt = rt.start_attempt(rt.publish(analyst(code)).value(), *log.log, "t").value();
      CHECK(attempt.tool_names() == std::vector<std::string>{"lookup_order", "run_code"});
      auto outcome = attempt.run_code("return 1");
      REQUIRE(outcome);
      REQUIRE(std::holds_alternative<refusal>(outcome.value()));
      return std::get<refusal>(outcome.value());
    };
    CHECK(refusal_of({.network = network_access::unrestricted}).reason == refusal_reason::network_not_granted);
    CHECK(run_code_payload(refusal_of({.network = network_access::unrestricted}), code_execution{}).starts_with(
        R"({"refused":{"reason":"network_not_granted","message":"network access is not granted by)"));
    CHECK(refusal_of({.profile = "broken"}).reason == refusal_reason::backend_not_ready);
    if (!conformance::isolated(backend))
      CHECK(refusal_of({.isolation = isolation_level::isolated}).reason == refusal_reason::isolation_unreachable);
    // The same attempt still runs what it can.
    auto attempt = rt.start_attempt(rt.publish(analyst()).value(), *log.log, "t").value();
    const auto ran = attempt.run_code("return 6 * 7").value();
    REQUIRE(std::holds_alternative<sandbox_result>(ran));
    CHECK(std::get<sandbox_result>(ran).value->text == "42");
    // What the model reads: the value, once; nothing empty, no grades the ask was promised.
    CHECK(run_code_payload(ran, *analyst().code) == R"({"value":42})");
  });
}

TEST_CASE("runtime: an unknown profile that slipped past publishing stops the Attempt, loudly") {
  auto rt = runtime::create({.single = std::make_shared<unready_sandbox>(), .profiles_known_at_publish = false}).value();
  const auto version = rt.publish(analyst(code_execution{.profile = "gpu"}));
  REQUIRE(version);
  scratch_log log;
  const auto attempt = rt.start_attempt(version.value(), *log.log, "t");
  REQUIRE_FALSE(attempt);
  CHECK(attempt.error().kind == error_kind::sandbox_setup);
  CHECK(attempt.error().message().find("\"gpu\"") != std::string::npos);
}

TEST_CASE("runtime: the four-way narrowing, end to end through run_code, as the child observes it") {
  conformance::for_each_backend([](sandbox&, const auto& backend) {
    // backend ceiling: 10 s of CPU; tenant policy: 8; profile hard limit: 5.
    auto rt = runtime::create({.profiles = {{.name = "default",
                                             .backend = shared_backend(backend),
                                             .hard_limits = {.cpu_seconds = 5.0}}},
                               .policy = [](std::string_view, const code_execution_grant& offered) {
                                 auto narrowed = offered;
                                 narrowed.limits.cpu_seconds = 8.0;
                                 return narrowed;
                               }})
                  .value();
    scratch_log log;
    const auto cpu_limit_seen = [&](code_execution_limits asked) {
      auto attempt = rt.start_attempt(rt.publish(analyst(code_execution{.limits = asked})).value(), *log.log, "t")
                         .value();
      const auto ran = attempt.run_code(read_own_limits(backend) + "return cpu").value();
      REQUIRE(std::holds_alternative<sandbox_result>(ran));
      const auto& r = std::get<sandbox_result>(ran);
      REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
      return r.value->text;
    };
    CHECK(cpu_limit_seen({.cpu_seconds = 60.0}) == "5");  // the profile's cap wins over a wider ask
    CHECK(cpu_limit_seen({.cpu_seconds = 3.0}) == "3");   // an ask below every cap is what it gets
    CHECK(cpu_limit_seen({}) == "5");                     // no ask: whatever the profile allows
  });
}

TEST_CASE("runtime: a profile that caps only the wall clock leaves CPU and memory to the spec, up to the ceiling") {
  conformance::for_each_backend([](sandbox&, const auto& backend) {
    // A ceiling above sandbox_limits' defaults (10 s of CPU, 512 MiB), so a cap that fell back to
    // those defaults would show in what the child reads back.
    auto raised = backend;
    raised.options.limit_ceiling = {.cpu_seconds = 40.0, .address_space_bytes = std::uint64_t{1} << 30};
    if (raised.container) raised.container->limit_ceiling = raised.options.limit_ceiling;
    auto rt = runtime::create({.profiles = {{.name = "default",
                                             .backend = shared_backend(raised),
                                             .hard_limits = {.wall_seconds = 20.0}}}})
                  .value();
    scratch_log log;
    const auto limits_seen = [&](code_execution_limits asked) {
      auto attempt = rt.start_attempt(rt.publish(analyst(code_execution{.limits = asked})).value(), *log.log, "t")
                         .value();
      const auto ran = attempt.run_code(read_own_limits(backend) + "return '%d %d' % (cpu, memory)").value();
      REQUIRE(std::holds_alternative<sandbox_result>(ran));
      const auto& r = std::get<sandbox_result>(ran);
      REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
      return r.value->text;
    };
    CHECK(limits_seen({.cpu_seconds = 25.0, .memory_bytes = std::uint64_t{768} << 20}) == R"("25 805306368")");
    CHECK(limits_seen({}) == R"("40 1073741824")");  // no ask: the ceiling, the wall-clock cap aside
    CHECK(limits_seen({.cpu_seconds = 400.0}) == R"("40 1073741824")");  // never above the ceiling
  });
}

TEST_CASE("runtime: a policy that widens the grant is an error, not a wider sandbox") {
  auto rt = runtime::create({.single = std::make_shared<unready_sandbox>(),
                             .policy = [](std::string_view, const code_execution_grant& offered) {
                               auto wider = offered;
                               wider.limits.wall_seconds = offered.limits.wall_seconds.value * 10;
                               return wider;
                             }})
                .value();
  scratch_log log;
  auto attempt = rt.start_attempt(rt.publish(analyst()).value(), *log.log, "t").value();
  const auto outcome = attempt.run_code("return 1");
  REQUIRE_FALSE(outcome);
  CHECK(outcome.error().message().find("wider than the one it received") != std::string::npos);
}

TEST_CASE("runtime: verify_sandboxes describes every profile, running no program") {
  conformance::for_each_backend([](sandbox&, const auto& backend) {
    auto rt = runtime::create({.profiles = {{.name = "default", .backend = shared_backend(backend)},
                                            {.name = "broken", .backend = std::make_shared<unready_sandbox>()}}})
                  .value();
    const auto statuses = rt.verify_sandboxes();
    REQUIRE(statuses.size() == 2);
    CHECK(statuses[0].profile == "default");
    CHECK(statuses[0].described.ready);
    CHECK(statuses[1].profile == "broken");
    CHECK_FALSE(statuses[1].described.ready);
  });
}

TEST_CASE("runtime: a tenant's policy narrows the profile's BindingBudget for that tenant only") {
  conformance::for_each_backend([](sandbox&, const auto& backend) {
    conformance::recording_invoker invoker;
    // The runtime's catalogue has every tool the spec grants (publish checks it), and echo.
    conformance::listed_catalogue catalogue(std::vector<binding>{{"echo", ""}, {"lookup_order", ""}});
    auto rt = runtime::create({.profiles = {{.name = "default", .backend = shared_backend(backend)}},
                               .policy =
                                   [](std::string_view tenant, const code_execution_grant& offered) {
                                     auto narrowed = offered;
                                     if (tenant == "small") narrowed.budget.max_calls = 1;
                                     return narrowed;
                                   },
                               .catalogue = &catalogue,
                               .invoker = &invoker})
                  .value();
    const auto two_calls = conformance::echo_calls_program(2);
    const auto version = rt.publish(analyst()).value();
    for (const auto& [tenant, expected] : {std::pair{"small", R"([0,"budget_exhausted"])"}, {"large", "[0,1]"}}) {
      scratch_log log;
      auto attempt = rt.start_attempt(version, *log.log, tenant).value();
      const auto ran = attempt.run_code(two_calls).value();
      REQUIRE(std::holds_alternative<sandbox_result>(ran));
      const auto& r = std::get<sandbox_result>(ran);
      REQUIRE_MESSAGE(r.ok(), (r.failure ? r.failure->message : ""));
      CHECK(r.value->text == expected);
    }
  });
}
