#include "attachments.hpp"

#include <fmt/format.h>

#include "psych/attachment.hpp"

namespace psych::host {

namespace {

struct item {
  std::string name;
  std::string content_type;
  std::string_view captured;
  std::uint64_t produced;
};

}  // namespace

void attach_items(sandbox_result& result, const output_policy& policy, blob_store* store, std::string_view tenant) {
  std::vector<item> items{{"stdout", "text/plain", result.stdout_data, result.stdout_size},
                          {"stderr", "text/plain", result.stderr_data, result.stderr_size}};
  if (result.value) items.push_back({"value", "application/json", result.value->text, result.value->text.size()});
  for (const auto& file : result.artifacts)
    items.push_back({"artifact:" + file.path, "application/octet-stream", file.data, file.size_bytes});

  for (auto& [name, content_type, captured, produced] : items) {
    auto attachment = describe_item(name, content_type, captured, produced, policy);
    if (place(captured.size(), produced, policy, store != nullptr) == placement::store) {
      auto stored = store->put(tenant, content_type, captured);
      if (stored) {
        attachment.location = attachment_location::blob;
        attachment.handle = stored.value().handle;
        attachment.bytes_let_go = produced - captured.size();  // never captured: past max_bytes
        result.bindings_spent.preserved += captured.size();
      } else {
        const auto why = fmt::format("{}: not preserved: {}", name, stored.error().message());
        if (policy.preserve == output_preservation::required && !result.failure)
          result.failure = sandbox_failure{failure_kind::preservation_unavailable, why};
        else
          result.problems.push_back(why);
      }
    }
    result.attachments.push_back(std::move(attachment));
  }
}

}  // namespace psych::host
