#pragma once
// ArtifactPolicy: whether the files a program leaves in its workspace come back, and how much of
// them. Collected files are named by workspace-relative path, never a host path. Anything that is
// not a plain regular file of the workspace (a symlink, a hardlink that may lead outside, a
// device, a FIFO, a socket) is never followed and never collected; each omission is counted with
// its reason.
#include <cstdint>
#include <map>

#include <boost/hana/adapt_struct.hpp>

#include "psych/names.hpp"

namespace psych {

enum class artifact_collection { none, collect };
PSYCH_ENUM_NAMES(artifact_collection, "none", "collect");

struct artifact_policy {
  artifact_collection collection = artifact_collection::none;
  std::uint64_t max_files = 100;
  std::uint64_t max_file_bytes = std::uint64_t{8} << 20;
  std::uint64_t max_total_bytes = std::uint64_t{32} << 20;
  std::uint64_t max_depth = 16;
  friend constexpr bool operator==(const artifact_policy&, const artifact_policy&) = default;
};

/// Why a workspace entry was not collected.
enum class omission_reason {
  symlink,      ///< never followed
  hardlink,     ///< a regular file with more than one link: its other name may be outside
  device,       ///< character or block device
  fifo,
  socket,
  special,      ///< anything else that is not a regular file or a directory
  too_large,    ///< over max_file_bytes
  too_many,     ///< past max_files or max_total_bytes
  too_deep,     ///< below max_depth
  unreadable,   ///< could not be opened beneath the workspace (a race, or permissions)
};
PSYCH_ENUM_NAMES(omission_reason, "symlink", "hardlink", "device", "fifo", "socket", "special", "too_large",
                 "too_many", "too_deep", "unreadable");

}  // namespace psych

BOOST_HANA_ADAPT_STRUCT(psych::artifact_policy, collection, max_files, max_file_bytes, max_total_bytes, max_depth);
