#pragma once
// Random bytes from the operating system, as hex: every id and token the host makes (execution
// ids, launch tokens and secrets, directory and temporary-file names) comes from here.
#include <cstddef>
#include <string>

namespace psych::host {

/// `bytes` bytes from the system's random source (getrandom on Linux, getentropy on macOS,
/// BCryptGenRandom on Windows), as lowercase hex. The source fails only where it is missing
/// altogether; that is not an execution's failure, so it throws std::system_error as
/// std::random_device does.
std::string random_hex(std::size_t bytes);

}  // namespace psych::host
