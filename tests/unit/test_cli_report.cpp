// psych's readable report: whatever a program put into its result, the
// report an operator's terminal receives holds no control character.
#include <doctest/doctest.h>

#include <string>

#include "report.hpp"
#include "terminal_checks.hpp"

using namespace psych;
using psych::testing::terminal_control_in;

namespace {

/// Every sequence a program could use to drive a terminal, and bytes that are not UTF-8.
const std::string hostile =
    "A\x1b]52;c;aGVsbG8=\x07" "B\x1b]0;title\x07" "C\x1b]8;;http://x.invalid/\x1b\\link\x1b]8;;\x1b\\"
    "D\x1b[2J" "E\x07" "F\x08" "G\r" "H\xc2\x9b" "2J" "I\x9b" "J\x7f" "K\xff\xfe";

void check_safe(const std::string& report) {
  CHECK_MESSAGE(terminal_control_in(report).empty(), terminal_control_in(report) << "\n" << report);
}

}  // namespace

TEST_CASE("the result report escapes everything a program made") {
  sandbox_result r;
  r.value = json_text{"\"" + hostile + "\""};
  r.stdout_preview = hostile + "\nsecond line " + hostile + "\n";
  r.stdout_size = r.stdout_preview.size();
  r.stderr_preview = hostile;
  r.stderr_size = hostile.size();
  r.failure = sandbox_failure{.kind = failure_kind::exception, .message = "ValueError: " + hostile,
                              .traceback = "Traceback:\n  " + hostile + "\nValueError: " + hostile + "\n"};
  r.attachments.push_back({.name = "artifact:" + hostile, .handle = "blob-" + hostile, .size_bytes = 3,
                           .location = attachment_location::blob});
  r.artifacts_omitted = 1;
  r.artifacts_omitted_by_reason[open_enum<omission_reason>::from_spelling(hostile)] = 1;
  r.unavailable_bindings = {"tool" + hostile};
  r.problems = {"problem " + hostile};
  const auto report = cli::result_report(r);
  check_safe(report);
  // Each field is still shown, spelled out, and the report keeps its lines.
  CHECK(report.find("value: \"A\\x1b]52;c;aGVsbG8=\\x07B") != std::string::npos);
  CHECK(report.find("  | A\\x1b]52;") != std::string::npos);
  CHECK(report.find("  | second line A\\x1b") != std::string::npos);
  CHECK(report.find("failure: exception: ValueError: A\\x1b") != std::string::npos);
  CHECK(report.find("\n    A\\x1b]52") != std::string::npos);  // the traceback's indented line
  CHECK(report.find("attachment: artifact:A\\x1b") != std::string::npos);
  CHECK(report.find("blob-A\\x1b") != std::string::npos);
  CHECK(report.find("unavailable binding: toolA\\x1b") != std::string::npos);
  CHECK(report.find("problem: problem A\\x1b") != std::string::npos);
  CHECK(report.find("H\\x9b2JI\\x9bJ\\x7fK\\xff\\xfe") != std::string::npos);
  CHECK(report.find("G\\rH") != std::string::npos);
}

TEST_CASE("the refusal and describe reports escape what they quote") {
  check_safe(cli::refusal_report({.reason = refusal_reason::isolation_unreachable, .message = hostile}));
  description d;
  d.backend = hostile;
  d.interpreter = "/opt/" + hostile;
  d.launcher = hostile;
  d.mechanisms = {hostile};
  d.problems = {hostile};
  const auto report = cli::description_report(d, {{.name = hostile, .reason = hostile}});
  check_safe(report);
  CHECK(report.find("interpreter: /opt/A\\x1b]52") != std::string::npos);
}

TEST_CASE("the result report writes a missing value as JSON's null, like every other value") {
  sandbox_result r;
  r.isolation = isolation_level::process;
  const auto report = cli::result_report(r);
  CHECK(report.find("value: null\n") != std::string::npos);
  CHECK(report.find("None") == std::string::npos);
  r.value = json_text{"[1, null]"};
  CHECK(cli::result_report(r).find("value: [1, null]\n") != std::string::npos);
}

TEST_CASE("where nothing ran, the report claims no network either way") {
  sandbox_result r;
  r.failure = sandbox_failure{.kind = failure_kind::launch_failed, .message = "no launcher"};
  const auto nothing_ran = cli::result_report(r);
  CHECK(nothing_ran.find("isolation: none (nothing ran)") != std::string::npos);
  CHECK(nothing_ran.find("network denied") == std::string::npos);
  r.isolation = isolation_level::isolated;
  r.network_denied = true;
  CHECK(cli::result_report(r).find("network denied: yes") != std::string::npos);
}
