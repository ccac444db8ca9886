// Preserved outputs on the Run's `preserved` meter (src/host/execution/attachments.cpp): each output an
// execution puts in the BlobStore is journalled as `output_preserved` before the put, a fresh open
// of the log counts it, and the next execution of the same Run finds the meter spent by it: its own
// outputs and its calls' result handles are refused once the Run's ceiling is reached.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "execution/finish_result.hpp"
#include "bindings/binding_gateway.hpp"
#include "temp_dir.hpp"
#include "psych/host/blob_store.hpp"
#include "psych/host/run_log.hpp"
#include "run_log_access.hpp"

using namespace psych;

using psych::testing::open_log;
using psych::testing::records_of;

namespace {

sandbox_result printed(std::string out, std::string err = {}) {
  sandbox_result r;
  r.stdout_size = out.size();
  r.stdout_data = std::move(out);
  r.stderr_size = err.size();
  r.stderr_data = std::move(err);
  return r;
}

const result_attachment& attachment_named(const sandbox_result& r, std::string_view name) {
  const auto found = std::ranges::find(r.attachments, name, &result_attachment::name);
  REQUIRE(found != r.attachments.end());
  return *found;
}

/// The host's tail of a result (finish_result.hpp): each output preserved, or not, and charged.
void attach(sandbox_result& r, const output_policy& policy, blob_store* store,
            const host::preservation_account& account) {
  host::finish_result(r, {}, {.output = policy, .blobs = store, .tenant = "tenant", .account = account});
}

/// Allows every call; the calls under test are completed by hand.
struct allowing_invoker final : tool_invoker {
  call_permission permit(const tool_call&) override { return {}; }
  void invoke(const tool_call&, std::stop_token, std::function<void(tool_outcome)> done) override {
    done(tool_outcome::error(tool_error_kind::tool_failed, "not run here"));
  }
};

}  // namespace

TEST_CASE("preserved outputs are journalled, recounted from the log, and spend the Run's preserved meter") {
  const psych::testing::temp_dir dir("psych-preserved-test");
  auto opened = open_directory_blob_store(dir.file("blobs"));
  REQUIRE(opened);
  auto& store = *opened.value();
  const std::string log_path = dir.file("run.log");
  const binding_budget budget{.max_result_bytes = 1000, .max_run_preserved_bytes = 25000};
  const output_policy policy{.preview_bytes = 100};

  {  // The first execution: its stdout goes to the store and into the log.
    auto log = open_log(log_path);
    auto first = printed(std::string(20000, 'x'), "short");
    attach(first, policy, &store,
                       {budget, {.log = log.get(), .spent_before = tally(records_of(*log)).spent, .execution_id = "x1"}});
    REQUIRE(first.ok());
    CHECK(first.problems.empty());
    CHECK(attachment_named(first, "stdout").location == attachment_location::blob);
    CHECK(attachment_named(first, "stderr").location == attachment_location::inline_bytes);  // never stored
    CHECK(first.bindings_spent.preserved == 20000);
    CHECK(records_of(*log) ==
          std::vector<run_log_record>{output_preserved{.execution_id = "x1", .item = "stdout", .bytes = 20000}});
  }

  // A fresh open recounts it: the log, not memory, is the Run's meter.
  auto log = open_log(log_path);
  const meter_readings spent = tally(records_of(*log)).spent;
  CHECK(spent.preserved == 20000);
  CHECK(spent.calls == 0);
  const run_account second_run{.log = log.get(), .spent_before = spent, .execution_id = "x2"};

  SUBCASE("the next execution's output past the Run's ceiling is not preserved, and says why") {
    auto second = printed(std::string(20000, 'y'));
    attach(second, policy, &store, {budget, second_run});
    REQUIRE(second.ok());  // WHEN_AVAILABLE: a problem, not a failure
    const auto& out = attachment_named(second, "stdout");
    CHECK(out.location == attachment_location::preview_only);
    CHECK(out.handle.empty());
    CHECK(out.bytes_let_go > 19800);
    REQUIRE(second.problems.size() == 1);
    CHECK(second.problems[0] ==
          "stdout: not preserved: the budget has no room for its 20000 bytes (preserved: 20000 of 25000 spent in "
          "this Run)");
    CHECK(second.bindings_spent.preserved == 0);
    CHECK(records_of(*log).size() == 1);  // nothing spent, nothing journalled

    auto required = printed(std::string(20000, 'y'));
    attach(required, {.preview_bytes = 100, .preserve = output_preservation::required}, &store,
                       {budget, second_run});
    REQUIRE(required.failure);
    CHECK(required.failure->kind == failure_kind::preservation_unavailable);
    CHECK(required.failure->message.find("preserved: 20000 of 25000 spent in this Run") != std::string::npos);
  }

  SUBCASE("what still fits is preserved and journalled; the call's result handle then finds no room") {
    auto second = printed(std::string(3000, 'z'));
    attach(second, policy, &store, {budget, second_run});
    REQUIRE(second.ok());
    CHECK(attachment_named(second, "stdout").location == attachment_location::blob);
    CHECK(tally(records_of(*log)).spent.preserved == 23000);

    // A later execution of the Run: a result over max_result_bytes would be preserved under a
    // handle, and 3000 more bytes do not fit in what the Run has left.
    allowing_invoker invoker;
    host::binding_gateway gateway({.offered = {{"big", "a large result"}},
                                   .invoker = &invoker,
                                   .budget = budget,
                                   .run = {.log = log.get(), .spent_before = tally(records_of(*log)).spent,
                                           .execution_id = "x3"},
                                   .blobs = &store,
                                   .tenant = "tenant"});
    auto admission = gateway.admit({.id = 1, .tool = "big", .arguments = json_text{"{}"}});
    REQUIRE(std::holds_alternative<host::admitted_call>(admission));
    const auto answer = gateway.complete(std::get<host::admitted_call>(admission),
                                         tool_outcome::value("\"" + std::string(3000, 'b') + "\""));
    CHECK_FALSE(answer.ok);
    CHECK_FALSE(answer.handle);
    REQUIRE(answer.error);
    CHECK(answer.error->kind == tool_error_kind::budget_exhausted);
    CHECK(answer.error->message == "preserved: 23000 of 25000 spent in this Run");
  }
}

TEST_CASE("preserved outputs: with no run log they are counted in memory once stored") {
  const psych::testing::temp_dir dir("psych-preserved-test");
  auto opened = open_directory_blob_store(dir.file("blobs"));
  REQUIRE(opened);
  auto r = printed(std::string(5000, 'x'));
  attach(r, {.preview_bytes = 100}, opened.value().get(), {});
  REQUIRE(r.ok());
  CHECK(attachment_named(r, "stdout").location == attachment_location::blob);
  CHECK(r.bindings_spent.preserved == 5000);
}
