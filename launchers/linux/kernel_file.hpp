#pragma once
// Writing a kernel interface file (cgroupfs, /proc/<pid>/uid_map): the kernel takes each write()
// as one whole value, so a value is written in exactly one call, and a short write is an error
// rather than something to resume.
#include <string>
#include <string_view>

#include "setup_error.hpp"

namespace psych::launcher {

/// Opens `path` for writing and writes `value` in one write(); errors name the stage, the call
/// and the path with the value.
setup_result<void> write_kernel_file(launch_stage stage, const std::string& path, std::string_view value);

}  // namespace psych::launcher
