#pragma once
// ResultAttachment: one item of a result (a stream, the returned value, a collected artifact) as
// the model's payload carries it: a deterministic preview, and where the rest lives. Pure: which
// location an item gets is decided here, from its sizes, the OutputPolicy and whether a BlobStore
// is wired; the host does the storing.
#include <cstdint>
#include <string>
#include <string_view>

#include "psych/names.hpp"
#include "psych/output.hpp"
#include "psych/preview.hpp"

namespace psych {

enum class attachment_location {
  inline_bytes,  ///< small enough: the preview is the whole item
  blob,          ///< preserved in the BlobStore under `handle`; read_tool_output pages it
  preview_only,  ///< not preserved (no store, WHEN_AVAILABLE): the preview is all that is left
};
PSYCH_ENUM_NAMES(attachment_location, "inline", "blob", "preview_only");

struct result_attachment {
  std::string name;          ///< "stdout", "stderr", "value", or "artifact:<workspace-relative path>"
  std::string handle;        ///< the BlobStore handle, when location is blob
  std::string content_type;
  std::uint64_t size_bytes = 0;   ///< bytes produced, even past what was captured
  bool truncated = false;         ///< fewer bytes were captured than produced
  attachment_location location = attachment_location::inline_bytes;
  std::uint64_t bytes_let_go = 0;  ///< bytes neither in the preview nor preserved
  std::string preview;             ///< the model's view, deterministic; UTF-8
  friend bool operator==(const result_attachment&, const result_attachment&) = default;
};

/// Where an item goes. `captured` is what the host holds (at most max_bytes for a stream),
/// `produced` what the program made.
enum class placement { inline_bytes, store, preview_only, refuse };

constexpr placement place(std::uint64_t captured, std::uint64_t produced, const output_policy& policy,
                          bool store_wired) noexcept {
  if (produced <= policy.preview_bytes && captured == produced) return placement::inline_bytes;
  if (store_wired) return placement::store;
  return policy.preserve == output_preservation::required ? placement::refuse : placement::preview_only;
}

/// The attachment for an item, before any storing, from its preview as `cut`: the sizes, and what
/// is let go if it stays preview-only. The host sets `location`, `handle` and `bytes_let_go` for a stored one.
inline result_attachment describe_item(std::string name, std::string content_type, std::string_view captured,
                                       std::uint64_t produced, preview_cut cut) {
  return {.name = std::move(name),
          .content_type = std::move(content_type),
          .size_bytes = produced,
          .truncated = produced > captured.size(),
          .location = cut.kept_bytes == produced ? attachment_location::inline_bytes : attachment_location::preview_only,
          .bytes_let_go = produced - cut.kept_bytes,
          .preview = std::move(cut.text)};
}

/// As above, with the preview cut here from the policy's preview_bytes.
inline result_attachment describe_item(std::string name, std::string content_type, std::string_view captured,
                                       std::uint64_t produced, const output_policy& policy) {
  return describe_item(std::move(name), std::move(content_type), captured, produced,
                       cut_preview(captured, produced, policy.preview_bytes));
}

}  // namespace psych
