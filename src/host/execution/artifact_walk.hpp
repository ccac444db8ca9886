#pragma once
// Collecting a workspace's files after the program's tree is gone. Every open is of one name
// relative to its directory, never through a link: on Linux openat2(RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV) from a directory fd, on Windows
// NtCreateFile relative to a directory handle with FILE_OPEN_REPARSE_POINT. What was opened is
// classified from that descriptor or handle, so a program racing to swap a directory for a link
// gains nothing: the walk never leaves the tree. artifact_walk_posix.cpp, artifact_walk_windows.cpp;
// what is kept, by the policy, is artifact_harvest.hpp's.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "psych/artifacts.hpp"
#include "psych/result.hpp"

namespace psych::host {

struct harvested_file {
  std::string path;   ///< workspace-relative, '/'-separated, never absolute, never with ".."
  std::string bytes;  ///< the whole file (at most max_file_bytes)
};

struct harvest {
  std::vector<harvested_file> files;  ///< sorted by path
  std::map<omission_reason, std::uint64_t> omitted;
  [[nodiscard]] std::uint64_t omitted_total() const {
    std::uint64_t total = 0;
    for (const auto& [reason, count] : omitted) total += count;
    return total;
  }
};

/// Walks `workspace` (a directory path on the host) under `policy`. Fails only when the workspace
/// itself cannot be opened; everything below it is collected or counted as omitted.
result<harvest> collect_artifacts(const std::string& workspace, const artifact_policy& policy);

}  // namespace psych::host
