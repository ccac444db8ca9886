#include "execution/attachments.hpp"

#include <optional>

#include <fmt/format.h>

#include "psych/attachment.hpp"

namespace psych::host {

namespace {

struct item {
  std::string name;
  std::string content_type;
  std::string_view captured;
  std::uint64_t produced;
  std::optional<preview_cut> preview;  ///< a stream's, cut already; nullopt: cut here
};

/// Why an item could not be preserved, or nothing when the meter has room and the log recorded it.
/// Once recorded the bytes are spent, whether the put then succeeds or not: the log never says less
/// than the store may hold, and this execution's reading stays what a reopened log would tally.
std::optional<std::string> charge(sandbox_result& result, const preservation_account& account, const item& it) {
  const std::uint64_t size = it.captured.size();
  meter_readings run_spent = account.run.spent_before;
  run_spent += result.bindings_spent;
  if (account.run.live) run_spent = account.run.live->read();
  if (const auto out = exhausted_by(account.budget, result.bindings_spent, run_spent, {.preserved = size}))
    return fmt::format("the budget has no room for its {} bytes ({})", size,
                       exhaustion_message(*out, account.budget, result.bindings_spent, run_spent));
  if (account.run.log) {
    auto recorded = account.run.log->append(
        output_preserved{.execution_id = account.run.execution_id, .item = it.name, .bytes = size});
    if (!recorded) return "run log: " + recorded.error().message();
    result.bindings_spent.preserved += size;
    if (account.run.live) account.run.live->add({.preserved = size});
  }
  return std::nullopt;
}

}  // namespace

void attach_items(sandbox_result& result, const output_policy& policy, blob_store* store, std::string_view tenant,
                  const preservation_account& account, stream_previews streams) {
  std::vector<item> items{{"stdout", "text/plain", result.stdout_data, result.stdout_size, std::move(streams.out)},
                          {"stderr", "text/plain", result.stderr_data, result.stderr_size, std::move(streams.err)}};
  if (result.value)
    items.push_back({"value", "application/json", result.value->text, result.value->text.size(), std::nullopt});
  for (const auto& file : result.artifacts)
    items.push_back({"artifact:" + file.path, "application/octet-stream", file.data, file.size_bytes, std::nullopt});

  const auto not_preserved = [&](const std::string& name, std::string_view why) {
    auto message = fmt::format("{}: not preserved: {}", name, why);
    if (policy.preserve == output_preservation::required && !result.failure)
      result.failure = sandbox_failure{failure_kind::preservation_unavailable, std::move(message)};
    else
      result.problems.push_back(std::move(message));
  };
  for (auto& it : items) {
    auto attachment = it.preview
                          ? describe_item(it.name, it.content_type, it.captured, it.produced, std::move(*it.preview))
                          : describe_item(it.name, it.content_type, it.captured, it.produced, policy);
    if (place(it.captured.size(), it.produced, policy, store != nullptr) == placement::store) {
      if (auto refused = charge(result, account, it)) {
        not_preserved(it.name, *refused);
      } else if (auto stored = store->put(tenant, it.content_type, it.captured); !stored) {
        not_preserved(it.name, stored.error().message());
      } else {
        attachment.location = attachment_location::blob;
        attachment.handle = stored.value().handle;
        attachment.bytes_let_go = it.produced - it.captured.size();  // never captured: past max_bytes
        if (!account.run.log) result.bindings_spent.preserved += it.captured.size();  // nothing recorded it
      }
    }
    result.attachments.push_back(std::move(attachment));
  }
}

}  // namespace psych::host
