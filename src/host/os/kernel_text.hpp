#pragma once
// A kernel-made text file (/proc, /sys) read whole: such files report no size, so they are read
// to their end rather than by length.
#include <filesystem>
#include <optional>
#include <string>

namespace psych::host {

/// The file's text, or nullopt when it cannot be opened (this kernel has no such file, or it is
/// not readable by this process).
std::optional<std::string> read_kernel_text(const std::filesystem::path& path);

}  // namespace psych::host
