#pragma once
// What an artifact walk keeps of what it finds, by the policy: the limits, the omission counts
// and the order. Each system's walk (artifact_walk_posix.cpp, artifact_walk_windows.cpp) opens and
// classifies entries its own way, and hands every decision about them to this.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "execution/artifact_walk.hpp"

namespace psych::host {

class harvester {
 public:
  /// Reads are made in pieces of this size, so a small file never costs a max_file_bytes buffer.
  static constexpr std::size_t read_chunk = std::size_t{64} << 10;

  explicit harvester(const artifact_policy& policy) : policy_(policy) {}

  void omit(omission_reason why) { ++out_.omitted[why]; }

  /// Whether a directory `depth` components below the workspace is walked. One deeper than the
  /// policy allows is counted once; what is inside is never seen.
  bool may_descend(std::uint64_t depth) {
    if (depth <= policy_.max_depth) return true;
    omit(omission_reason::too_deep);
    return false;
  }

  /// A regular file that classified as `size` bytes, read with `read(into, want)` (the count read,
  /// 0 at its end, nullopt on an error) if the policy admits it, and kept or counted.
  template <class Read>
  void take_file(std::string path, std::uint64_t size, Read read) {
    if (!admits(size)) return;
    // One byte past the cap tells a file that grew since it was classified from one that fits.
    const std::uint64_t limit = policy_.max_file_bytes == std::numeric_limits<std::uint64_t>::max()
                                    ? policy_.max_file_bytes
                                    : policy_.max_file_bytes + 1;
    std::string bytes;
    while (bytes.size() < limit) {
      const std::size_t have = bytes.size();
      const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(limit - have, read_chunk));
      bytes.resize(have + want);
      const std::optional<std::size_t> got = read(bytes.data() + have, want);
      if (!got) return omit(omission_reason::unreadable);
      bytes.resize(have + *got);
      if (*got == 0) break;
    }
    keep(std::move(path), std::move(bytes));
  }

  harvest take() && {
    std::ranges::sort(out_.files, {}, &harvested_file::path);
    return std::move(out_);
  }

 private:
  /// Whether a regular file that classified as `size` bytes is read at all; if not, it is counted.
  bool admits(std::uint64_t size) {
    if (size > policy_.max_file_bytes) return omit(omission_reason::too_large), false;
    if (out_.files.size() >= policy_.max_files || size > policy_.max_total_bytes - total_bytes_)
      return omit(omission_reason::too_many), false;
    return true;
  }

  /// What was read of an admitted file: kept, or counted as omitted should it have grown.
  void keep(std::string path, std::string bytes) {
    if (bytes.size() > policy_.max_file_bytes) return omit(omission_reason::too_large);
    if (bytes.size() > policy_.max_total_bytes - total_bytes_) return omit(omission_reason::too_many);
    total_bytes_ += bytes.size();
    out_.files.push_back({std::move(path), std::move(bytes)});
  }

  const artifact_policy& policy_;
  harvest out_;
  std::uint64_t total_bytes_ = 0;  ///< never above policy_.max_total_bytes
};

}  // namespace psych::host
