// The failure precedence: one execution, one failure, picked from the facts in a fixed order.
#include <doctest/doctest.h>

#include "psych/failure_decision.hpp"

using namespace psych;

namespace {

/// An interpreter that exited by itself with `code`.
interpreter_exit exited(std::int64_t code) { return {.exit_code = code}; }

/// An interpreter ended by `signal`, of its own or by the launcher's kill on request.
interpreter_exit signalled(std::string signal, bool on_request = false) {
  return {.exit_code = -1, .signal = std::move(signal), .killed_on_request = on_request};
}

program_report succeeded(std::string value) { return {.ok = true, .value = json_text{std::move(value)}}; }

program_report raised() {
  return {.ok = false,
          .error = program_failure{.kind = failure_kind::exception,
                                   .type = "MemoryError",
                                   .message = "",
                                   .traceback = "Traceback ...",
                                   .line = 3,
                                   .limit_hint = limit_name::memory_bytes}};
}

/// Facts in which every cause is present at once, so each branch is shown to win over all
/// those below it: removing causes from the top walks down the precedence.
execution_facts everything() {
  execution_facts f;
  f.launch_failure = "seccomp: seccomp_load(Invalid argument): filter rejected";
  f.isolation_failure = "requested isolation=isolated, the child's containment reached process";
  f.violation = "frame_unknown_type: \"bogus\"";
  f.probe_only = true;
  f.cancelled = true;
  f.backstop_fired = true;
  f.wall_seconds = 20;
  f.done = raised();
  f.channel_closed = true;
  f.exit = interpreter_exit{.exit_code = -1, .signal = "SIGKILL", .limit_hit = limit_name::cpu_seconds};
  return f;
}

failure_kind kind_of(const failure_decision& d) {
  REQUIRE(d.failure);
  return d.failure->kind;
}

}  // namespace

TEST_CASE("failure decision: the precedence, from the top") {
  auto f = everything();
  CHECK(kind_of(decide_failure(f)) == failure_kind::launch_failed);
  CHECK(decide_failure(f).failure->message == f.launch_failure);

  f.launch_failure.clear();
  CHECK(kind_of(decide_failure(f)) == failure_kind::isolation_unavailable);
  CHECK(decide_failure(f).failure->message == f.isolation_failure);

  f.isolation_failure.clear();
  CHECK(kind_of(decide_failure(f)) == failure_kind::protocol_violation);
  CHECK(decide_failure(f).failure->message == *f.violation);

  f.violation.reset();
  SUBCASE("a probe never fails once its containment report was graded") {
    const auto d = decide_failure(f);
    CHECK_FALSE(d.failure);
    CHECK_FALSE(d.value);
    CHECK_FALSE(d.limit_hit);
  }
  f.probe_only = false;
  CHECK(kind_of(decide_failure(f)) == failure_kind::cancelled);
  CHECK_FALSE(decide_failure(f).limit_hit);

  f.cancelled = false;
  SUBCASE("the host's backstop is a timeout") {
    const auto d = decide_failure(f);
    CHECK(kind_of(d) == failure_kind::timeout);
    CHECK(d.limit_hit == limit_name::wall_seconds);
    CHECK(d.failure->message == "the wall clock of 20 s ran out");
  }
  f.backstop_fired = false;
  SUBCASE("the launcher's wall clock is a timeout, over a report that came too late") {
    f.exit->limit_hit = limit_name::wall_seconds;
    f.wall_seconds = 0.5;
    const auto d = decide_failure(f);
    CHECK(kind_of(d) == failure_kind::timeout);
    CHECK(d.limit_hit == limit_name::wall_seconds);
    CHECK(d.failure->message == "the wall clock of 0.5 s ran out");
  }
  SUBCASE("the program's own error, over how the interpreter then ended") {
    const auto d = decide_failure(f);
    CHECK(kind_of(d) == failure_kind::exception);
    CHECK(d.failure->message == "MemoryError");
    CHECK(d.failure->traceback == "Traceback ...");
    CHECK(d.failure->line == 3);
    CHECK(d.limit_hit == limit_name::memory_bytes);
  }
  SUBCASE("the program's value, over how the interpreter then ended") {
    f.done = succeeded(R"({"a":1})");
    const auto d = decide_failure(f);
    CHECK_FALSE(d.failure);
    REQUIRE(d.value);
    CHECK(d.value->text == R"({"a":1})");
    CHECK_FALSE(d.limit_hit);
  }
  f.done.reset();
  SUBCASE("a limit the launcher saw, over the channel it closed by dying") {
    const auto d = decide_failure(f);
    CHECK(kind_of(d) == failure_kind::limit_exceeded);
    CHECK(d.limit_hit == limit_name::cpu_seconds);
    CHECK(d.failure->message == "the cpu_seconds limit ended the interpreter (SIGKILL)");
  }
  f.exit->limit_hit.reset();
  SUBCASE("a signal of the interpreter's own, over the channel it closed by dying") {
    f.exit = signalled("SIGSEGV");
    const auto d = decide_failure(f);
    CHECK(kind_of(d) == failure_kind::crashed);
    CHECK(d.failure->message == "the interpreter ended without reporting a result (killed by SIGSEGV)");
    CHECK_FALSE(d.limit_hit);
  }
  SUBCASE("the channel closed and the host had the tree killed") {
    f.exit = signalled("SIGKILL", /*on_request=*/true);
    const auto d = decide_failure(f);
    CHECK(kind_of(d) == failure_kind::channel_closed);
    CHECK(d.failure->message ==
          "the program's channel closed before it reported a result; the host ended the execution at once");
    CHECK_FALSE(d.limit_hit);
  }
  SUBCASE("the channel closed and the interpreter exited by itself") {
    f.exit = exited(3);
    const auto d = decide_failure(f);
    CHECK(kind_of(d) == failure_kind::channel_closed);
    CHECK(d.failure->message ==
          "the program's channel closed before it reported a result (the interpreter exited with status 3)");
  }
  SUBCASE("no exit report at all is a crash, whatever the channel did") {
    f.exit.reset();
    const auto d = decide_failure(f);
    CHECK(kind_of(d) == failure_kind::crashed);
    CHECK(d.failure->message == "the interpreter ended without reporting a result (the launcher did not report how)");
  }
  SUBCASE("without the channel closing first, an exit without a report is a crash") {
    f.channel_closed = false;
    f.exit = exited(0);
    const auto d = decide_failure(f);
    CHECK(kind_of(d) == failure_kind::crashed);
    CHECK(d.failure->message == "the interpreter ended without reporting a result (exit status 0)");
  }
}

TEST_CASE("failure decision: the program's report") {
  execution_facts f;
  f.wall_seconds = 20;
  f.channel_closed = false;
  f.exit = exited(0);

  SUBCASE("a JSON null value is no value") {
    f.done = succeeded("null");
    const auto d = decide_failure(f);
    CHECK_FALSE(d.failure);
    CHECK_FALSE(d.value);
  }
  SUBCASE("ok without a value") {
    f.done = program_report{.ok = true};
    const auto d = decide_failure(f);
    CHECK_FALSE(d.failure);
    CHECK_FALSE(d.value);
  }
  SUBCASE("each of the program's kinds is kept, and its message joins type and text") {
    for (const auto kind : {failure_kind::exception, failure_kind::syntax_error, failure_kind::value_not_serializable}) {
      CAPTURE(name_of(kind));
      f.done = program_report{.ok = false,
                              .error = program_failure{.kind = kind, .type = "T", .message = "m", .line = 7}};
      const auto d = decide_failure(f);
      CHECK(kind_of(d) == kind);
      CHECK(d.failure->message == "T: m");
      CHECK(d.failure->line == 7);
      CHECK_FALSE(d.limit_hit);
    }
  }
  SUBCASE("a message alone, or a type alone") {
    f.done = program_report{.ok = false, .error = program_failure{.message = "only text"}};
    CHECK(decide_failure(f).failure->message == "only text");
    f.done = program_report{.ok = false, .error = program_failure{.type = "KeyboardInterrupt"}};
    CHECK(decide_failure(f).failure->message == "KeyboardInterrupt");
  }
  SUBCASE("not ok without an error says nothing: how the interpreter ended decides") {
    f.done = program_report{.ok = false};
    f.exit = signalled("SIGABRT");
    const auto d = decide_failure(f);
    CHECK(kind_of(d) == failure_kind::crashed);
    CHECK(d.failure->message == "the interpreter ended without reporting a result (killed by SIGABRT)");
  }
}

TEST_CASE("failure decision: a limit the launcher saw without a signal") {
  execution_facts f;
  f.channel_closed = true;
  f.exit = interpreter_exit{.exit_code = 1, .limit_hit = limit_name::file_size_bytes};
  const auto d = decide_failure(f);
  CHECK(kind_of(d) == failure_kind::limit_exceeded);
  CHECK(d.limit_hit == limit_name::file_size_bytes);
  CHECK(d.failure->message == "the file_size_bytes limit ended the interpreter");
}

TEST_CASE("failure decision: a memory limit too small for the interpreter to start says so") {
  execution_facts f;
  f.wall_seconds = 20;
  f.channel_closed = true;
  f.exit = signalled("SIGSEGV");
  f.memory_bytes = 1;
  SUBCASE("no report at all under 1 byte: the limit, named with what starting needs") {
    const auto d = decide_failure(f);
    CHECK(kind_of(d) == failure_kind::limit_exceeded);
    CHECK(d.limit_hit == limit_name::memory_bytes);
    CHECK(d.failure->message ==
          "the memory limit of 1 bytes is below what the interpreter needs to start (about 16 MiB for CPython and "
          "psych's runtime): it ended before running the program (killed by SIGSEGV)");
  }
  SUBCASE("a loader's exit under 8 MiB is the same") {
    f.memory_bytes = std::uint64_t{8} << 20;
    f.exit = exited(127);
    CHECK(decide_failure(f).limit_hit == limit_name::memory_bytes);
  }
  SUBCASE("once the child reported its containment, the interpreter had started: a crash is a crash") {
    f.reported_containment = true;
    CHECK(kind_of(decide_failure(f)) == failure_kind::crashed);
  }
  SUBCASE("a start that failed under it is the limit too, with the launch's words") {
    f.launch_failure = "the container runtime ended before the launcher connected";
    const auto d = decide_failure(f);
    CHECK(kind_of(d) == failure_kind::limit_exceeded);
    CHECK(d.limit_hit == limit_name::memory_bytes);
    CHECK(d.failure->message.ends_with(
        "the launch failed (the container runtime ended before the launcher connected)"));
    f.memory_bytes = too_small_to_start_bytes;
    CHECK(kind_of(decide_failure(f)) == failure_kind::launch_failed);
  }
  SUBCASE("a limit with room to start explains nothing") {
    f.memory_bytes = too_small_to_start_bytes;
    CHECK(kind_of(decide_failure(f)) == failure_kind::crashed);
  }
  SUBCASE("an unknown limit explains nothing") {
    f.memory_bytes = 0;
    CHECK(kind_of(decide_failure(f)) == failure_kind::crashed);
  }
  SUBCASE("the program's own report still wins") {
    f.done = program_report{.ok = true};
    CHECK_FALSE(decide_failure(f).failure);
  }
}
