// The model's payload of one run_code call (src/host/runtime/model_payload.cpp): every item once, nothing
// empty, a handle only for preserved bytes, grades only below what the ask promised, and every
// failure, limit, refusal, cut preview, artifact and degraded grade still there and unambiguous.
// The results are built the way the host builds them (finish_result), without running a program.
#include <doctest/doctest.h>

#include <string>
#include <string_view>

#include "execution/finish_result.hpp"
#include "backends/platform_backends.hpp"
#include "temp_dir.hpp"
#include "psych/grading.hpp"
#include "psych/host/blob_store.hpp"
#include "psych/host/model_payload.hpp"
#include "psych/host/read_tool_output.hpp"
#include "psych/host/result_json.hpp"
#include "psych/host/runtime.hpp"
#include "psych/protocol/json.hpp"

using namespace psych;

namespace {

constexpr guarantee_grades all_enforced{
    .filesystem = enforcement::enforced, .network = enforcement::enforced, .process_tree = enforcement::enforced,
    .identity = enforcement::enforced, .cpu = enforcement::enforced, .memory = enforcement::enforced,
    .file_size = enforcement::enforced, .process_count = enforcement::enforced,
    .wall_clock = enforcement::enforced, .environment = enforcement::enforced};

/// What PROCESS reaches on a host with Landlock and a lesser uid (docs/grading.md).
constexpr guarantee_grades process_grades{
    .filesystem = enforcement::unverified, .network = enforcement::enforced, .process_tree = enforcement::enforced,
    .identity = enforcement::enforced, .cpu = enforcement::unverified, .memory = enforcement::unverified,
    .file_size = enforcement::enforced, .process_count = enforcement::enforced,
    .wall_clock = enforcement::enforced, .environment = enforcement::enforced};

/// A completed execution at ISOLATED with every guarantee enforced, printing `out` and `err`.
sandbox_result ran(std::string out = {}, std::string err = {}) {
  sandbox_result r;
  r.stdout_size = out.size();
  r.stdout_data = std::move(out);
  r.stderr_size = err.size();
  r.stderr_data = std::move(err);
  r.isolation = isolation_level::isolated;
  r.guarantees = all_enforced;
  r.network_denied = true;
  r.duration_seconds = 0.27;
  return r;
}

/// The host's last step: the previews, and each item becomes an attachment, in the store when one is wired.
sandbox_result attached(sandbox_result r, const output_policy& policy = {}, blob_store* store = nullptr) {
  host::finish_result(r, {}, {.output = policy, .blobs = store, .tenant = "tenant", .account = {}});
  return r;
}

std::string payload_of(const sandbox_result& r, isolation_level asked = isolation_level::isolated) {
  auto payload = host::model_payload(r, promised_grades(asked, network_access::none));
  // Always one valid JSON value.
  CHECK(protocol::decode_json<json_text>(payload));
  return payload;
}

std::size_t occurrences(std::string_view haystack, std::string_view needle) {
  std::size_t count = 0;
  for (auto at = haystack.find(needle); at != std::string_view::npos; at = haystack.find(needle, at + 1)) ++count;
  return count;
}

/// A preview appears once: its text, JSON-escaped as the payload carries it, is found exactly once.
void check_once(std::string_view payload, const std::string& preview) {
  const auto escaped = protocol::encode_json(preview);  // "...", quotes included
  INFO("preview: ", preview);
  CHECK(occurrences(payload, std::string_view(escaped).substr(1, escaped.size() - 2)) == 1);
}

}  // namespace

TEST_CASE("model payload: a value alone is the value, and nothing else") {
  auto r = ran();
  r.value = json_text{"1"};
  const auto payload = payload_of(attached(r));
  CHECK(payload == R"({"value":1})");
  CHECK(payload.size() <= 80);
  // The full result is unchanged: everything is still there for the runtime and `psych run --json`.
  const auto full = host::result_to_json(attached(r));
  CHECK(full.find(R"("attachments":[{"name":"stdout")") != std::string::npos);
  CHECK(full.find(R"("guarantees":{"filesystem":"enforced")") != std::string::npos);
}

TEST_CASE("model payload: nothing returned and nothing printed is an empty object") {
  CHECK(payload_of(attached(ran())) == "{}");
}

TEST_CASE("model payload: each preview appears once") {
  SUBCASE("whole: stdout, stderr and the value, each under its own name") {
    auto r = ran("hello from stdout\n", "a warning on stderr\n");
    r.value = json_text{R"({"files":20,"total_cents":36146800})"};
    const auto payload = payload_of(attached(r));
    CHECK(payload ==
          R"({"value":{"files":20,"total_cents":36146800},"stdout":"hello from stdout\n","stderr":"a warning on stderr\n"})");
    check_once(payload, "hello from stdout\n");
    check_once(payload, "a warning on stderr\n");
    CHECK(occurrences(payload, R"("total_cents":36146800)") == 1);
  }
  SUBCASE("cut: the preview under partial, never also at the top") {
    const auto r = attached(ran(std::string(3000, 'a') + std::string(3000, 'z')), {.preview_bytes = 300});
    const auto payload = payload_of(r);
    const auto& preview = r.attachments.front().preview;
    REQUIRE(preview.find("bytes omitted") != std::string::npos);
    check_once(payload, preview);
    CHECK(occurrences(payload, "bytes omitted") == 1);
    CHECK(payload.find(R"("stdout":")") == std::string::npos);
  }
}

TEST_CASE("model payload: a traceback, whole, with its line") {
  auto r = ran("a\n");
  r.failure = sandbox_failure{
      .kind = failure_kind::exception,
      .message = "ZeroDivisionError: division by zero",
      .traceback = "Traceback (most recent call last):\n  File \"<program>\", line 2, in <module>\n    x = 1/0\n"
                   "        ~^~\nZeroDivisionError: division by zero\n",
      .line = 2};
  CHECK(payload_of(attached(r)) ==
        R"({"failure":{"kind":"exception","message":"ZeroDivisionError: division by zero",)"
        R"("traceback":"Traceback (most recent call last):\n  File \"<program>\", line 2, in <module>\n)"
        R"(    x = 1/0\n        ~^~\nZeroDivisionError: division by zero\n","line":2},"stdout":"a\n"})");
}

TEST_CASE("model payload: a limit hit names the limit; no empty traceback, no line 0") {
  auto r = ran("step 1\n");
  r.failure = sandbox_failure{.kind = failure_kind::timeout, .message = "the wall clock of 1 s ran out"};
  r.limit_hit = limit_name::wall_seconds;
  CHECK(payload_of(attached(r)) ==
        R"({"failure":{"kind":"timeout","message":"the wall clock of 1 s ran out"},"limit_hit":"wall_seconds",)"
        R"("stdout":"step 1\n"})");
  SUBCASE("cancelled by the caller") {
    r.failure = sandbox_failure{.kind = failure_kind::cancelled, .message = "cancelled by the caller"};
    r.limit_hit.reset();
    r.cancelled = true;
    CHECK(payload_of(attached(r)) ==
          R"({"failure":{"kind":"cancelled","message":"cancelled by the caller"},"cancelled":true,)"
          R"("stdout":"step 1\n"})");
  }
}

TEST_CASE("model payload: a refusal is the refusal, whatever was asked") {
  const run_code_outcome refused =
      refusal{refusal_reason::network_not_granted, "network access is not granted by the tenant policy"};
  CHECK(run_code_payload(refused, code_execution{.network = network_access::unrestricted}) ==
        R"({"refused":{"reason":"network_not_granted","message":"network access is not granted by the tenant )"
        R"(policy"}})");
}

TEST_CASE("model payload: nothing started, so no attachments and no grades: the failure alone") {
  sandbox_result r;  // what a backend that refused before starting hands back
  r.failure = sandbox_failure{.kind = failure_kind::launch_failed, .message = "the launcher could not start"};
  CHECK(payload_of(r) == R"({"failure":{"kind":"launch_failed","message":"the launcher could not start"}})");
}

TEST_CASE("model payload: a cut output, preserved: preview, size, handle, and how to read the rest") {
  const psych::testing::temp_dir dir("psych-payload-test");
  auto opened = open_directory_blob_store(dir.file("blobs"));
  REQUIRE(opened);
  auto& store = *opened.value();
  std::string out;
  for (int i = 0; i < 2000; ++i) out += "row " + std::to_string(i) + "\n";
  auto r = ran(out, "short\n");
  r.value = json_text{"2000"};
  r = attached(r, {.preview_bytes = 120}, &store);
  const auto& stdout_item = r.attachments.front();
  REQUIRE(stdout_item.location == attachment_location::blob);
  const auto payload = payload_of(r);
  CHECK(payload == R"({"value":2000,"stderr":"short\n","partial":{"stdout":{"preview":)" +
                       protocol::encode_json(stdout_item.preview) + R"(,"size_bytes":)" + std::to_string(out.size()) +
                       R"(,"handle":")" + stdout_item.handle + R"("}},"read_more":"read_tool_output {handle, )"
                       R"(offset, limit} reads lines; {handle, pattern} searches"})");
  // The bytes docs/runtime.md shows.
  CHECK(stdout_item.preview ==
        "row 0\nrow 1\nrow 2\nrow 3\nrow 4\nrow 5\nrow 6\nrow 7\nrow 8\nrow 9\nrow 10\nrow 11\nrow 12\n"
        "[... 16770 bytes omitted ...]\n995\nrow 1996\nrow 1997\nrow 1998\nrow 1999\n");
  CHECK(stdout_item.handle == "blob:a71414c7f9b9e4264cde8dcded83f0f0a89ec9bdc74e8a30f4f2bea9bfeb0ac4");
  check_once(payload, stdout_item.preview);
  CHECK(occurrences(payload, "blob:") == 1);
  // The handle reads the bytes the preview left out.
  const auto window = read_tool_output(store, "tenant", stdout_item.handle, {.offset = 1000, .limit = 2});
  REQUIRE(window);
  REQUIRE(window.value().lines.size() == 2);
  CHECK(window.value().lines[0].text == "row 1000");
  CHECK(window.value().total_lines == 2000);
}

TEST_CASE("model payload: a cut output that was not preserved has no handle and no way to read more") {
  auto r = ran(std::string(5000, 'x'));
  r.value = json_text{"[" + std::string(400, '1') + "]"};  // a value larger than its preview
  r = attached(r, {.preview_bytes = 100});
  const auto payload = payload_of(r);
  CHECK(payload.find(R"("partial":{"stdout":{"preview":)") != std::string::npos);
  CHECK(payload.find(R"(,"size_bytes":5000},"value":{"preview":)") != std::string::npos);
  CHECK(payload.find(R"(,"size_bytes":402}})") != std::string::npos);
  CHECK(payload.find("handle") == std::string::npos);
  CHECK(payload.find("read_more") == std::string::npos);
  // The value's preview is text cut from JSON, so it is only ever under partial, never as "value".
  CHECK(payload.find(R"({"value":)") == std::string::npos);
  check_once(payload, r.attachments.back().preview);
}

TEST_CASE("model payload: artifacts by path, whole or cut, and what was omitted") {
  auto r = ran();
  r.artifacts = {{.path = "out/summary.csv", .size_bytes = 8, .data = "a,b\n1,2\n"},
                 {.path = "empty.txt", .size_bytes = 0, .data = ""},
                 {.path = "big.log", .size_bytes = 1000, .data = std::string(1000, 'L')}};
  r.artifacts_omitted = 2;
  r.artifacts_omitted_by_reason = {{omission_reason::symlink, 1}, {omission_reason::fifo, 1}};
  r = attached(r, {.preview_bytes = 100});
  const auto payload = payload_of(r);
  const auto& big = r.attachments.back();
  REQUIRE(big.name == "artifact:big.log");
  CHECK(payload == R"({"artifacts":{"out/summary.csv":"a,b\n1,2\n","empty.txt":""},"partial":{"artifact:big.log":)"
                   R"({"preview":)" + protocol::encode_json(big.preview) +
                       R"(,"size_bytes":1000}},"artifacts_omitted":{"fifo":1,"symlink":1}})");
}

TEST_CASE("model payload: grades only when one is below what was asked") {
  SUBCASE("PROCESS asked, PROCESS's usual grades: none sent") {
    auto r = ran();
    r.isolation = isolation_level::process;
    r.guarantees = process_grades;
    r.value = json_text{"1"};
    CHECK(payload_of(attached(r), isolation_level::process) == R"({"value":1})");
  }
  SUBCASE("a descendant survived: process_tree, and the problem in words") {
    auto r = ran();
    r.value = json_text{"1"};
    r.guarantees.process_tree = enforcement::unavailable;
    r.problems = {"process_tree: 1 descendant(s) survived the execution"};
    CHECK(payload_of(attached(r)) ==
          R"({"value":1,"guarantees_below_asked":{"process_tree":"unavailable"},)"
          R"("problems":["process_tree: 1 descendant(s) survived the execution"]})");
  }
  SUBCASE("ISOLATED reached, PROCESS asked: a filesystem merely unverified is still above the ask") {
    auto r = ran();
    r.guarantees.filesystem = enforcement::unverified;
    CHECK(payload_of(attached(r), isolation_level::process) == "{}");
    CHECK(payload_of(attached(r), isolation_level::isolated) ==
          R"({"guarantees_below_asked":{"filesystem":"unverified"}})");
  }
  SUBCASE("through run_code_payload, the spec's ask decides") {
    auto r = ran();
    r.isolation = isolation_level::process;
    r.guarantees = process_grades;
    r.guarantees.network = enforcement::unavailable;  // a working stack, and no network was asked
    CHECK(run_code_payload(attached(r), code_execution{}) == R"({"guarantees_below_asked":{"network":"unavailable"}})");
    CHECK(run_code_payload(attached(r), code_execution{.network = network_access::unrestricted}) == "{}");
  }
  SUBCASE("what the backend's platform cannot give is no shortfall; a grade below even that still is") {
    // Windows at PROCESS: no per-process file size cap, so file_size is unavailable on every run.
    auto r = ran();
    r.isolation = isolation_level::process;
    r.guarantees = process_grades;
    r.guarantees.file_size = enforcement::unavailable;
    r.guarantees.network = enforcement::unverified;
    const code_execution unrestricted{.network = network_access::unrestricted};
    CHECK(run_code_payload(attached(r), unrestricted) == R"({"guarantees_below_asked":{"file_size":"unavailable"}})");
    r.strongest_grades = host::strongest_grades_of("windows-process");
    CHECK(run_code_payload(attached(r), unrestricted) == "{}");
    r.guarantees.process_tree = enforcement::unavailable;  // a descendant survived: Windows owes that
    CHECK(run_code_payload(attached(r), unrestricted) == R"({"guarantees_below_asked":{"process_tree":"unavailable"}})");
    // macOS caps no memory; Linux's backends hold nothing back.
    r = ran();
    r.isolation = isolation_level::process;
    r.guarantees = process_grades;
    r.guarantees.memory = enforcement::unavailable;
    r.strongest_grades = host::strongest_grades_of("macos-process");
    CHECK(run_code_payload(attached(r), unrestricted) == "{}");
    r.strongest_grades = host::strongest_grades_of("linux-process");
    CHECK(run_code_payload(attached(r), unrestricted) == R"({"guarantees_below_asked":{"memory":"unavailable"}})");
  }
}

TEST_CASE("model payload: bindings that no longer resolve are named") {
  auto r = ran();
  r.unavailable_bindings = {"support__lookup"};
  CHECK(payload_of(attached(r)) == R"({"unavailable_bindings":["support__lookup"]})");
}
