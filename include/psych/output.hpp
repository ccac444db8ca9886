#pragma once
// What happens to a program's output: how much the model sees, how much a
// backend keeps at all, and whether keeping the rest is required.
#include <cstdint>

#include <boost/hana/adapt_struct.hpp>

#include "psych/names.hpp"

namespace psych {

enum class output_preservation {
  /// Fail the call loudly when the bytes cannot be preserved (no BlobStore wired).
  required,
  /// Keep the preview, record how many bytes were let go.
  when_available,
};
PSYCH_ENUM_NAMES(output_preservation, "required", "when_available");

struct output_policy {
  /// Per stream: what the model sees.
  std::uint64_t preview_bytes = 4'000;
  /// Per stream: what a backend captures at all; the rest is counted, not kept.
  std::uint64_t max_bytes = std::uint64_t{8} << 20;
  output_preservation preserve = output_preservation::when_available;
  friend constexpr bool operator==(const output_policy&, const output_policy&) = default;
};

}  // namespace psych

BOOST_HANA_ADAPT_STRUCT(psych::output_policy, preview_bytes, max_bytes, preserve);
