#pragma once
// Checks of a launch frame's values that every launcher makes alike, before it creates anything:
// the token, and the limits against the ceilings past which no real request lies. Each launcher
// turns a refusal into its own `error` frame and adds what only it knows (paths, its OS's ceilings).
// Like the rest of the protocol headers, it needs neither fmt nor anything of a host.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <string>

#include "psych/limits.hpp"
#include "psych/protocol/launch_stage.hpp"

namespace psych::protocol {

/// Why a launch is refused: the `error` frame's stage and message.
struct launch_refusal {
  launch_stage stage;
  std::string message;
};

/// The token travels as an argument; hex keeps it free of NULs and shell surprises.
inline std::optional<launch_refusal> check_token(const std::string& token) {
  if (token.empty() || token.size() > 128 ||
      !std::all_of(token.begin(), token.end(), [](unsigned char c) { return std::isxdigit(c) != 0; }))
    return launch_refusal{launch_stage::launch, "token must be 1 to 128 hex digits"};
  return std::nullopt;
}

/// The most bytes a memory or file-size limit may name on the launcher's OS, written as a power
/// of two: its address space, or what its limit arithmetic holds.
struct byte_ceiling {
  int power_of_two = 62;
  [[nodiscard]] std::uint64_t bytes() const { return std::uint64_t{1} << power_of_two; }
};

/// Valid limits (validate_limits), each under a ceiling: a century of CPU or wall clock, `bytes`,
/// and 2^22 processes (Linux's pid_max).
inline std::optional<launch_refusal> check_limits(const sandbox_limits& limits, byte_ceiling bytes) {
  constexpr double max_seconds = 100.0 * 365 * 24 * 3600;
  constexpr std::uint64_t max_processes = std::uint64_t{1} << 22;
  if (auto valid = validate_limits(limits); !valid) return launch_refusal{launch_stage::limits, valid.error().message()};
  if (limits.cpu_seconds.value > max_seconds || limits.wall_seconds.value > max_seconds)
    return launch_refusal{launch_stage::limits, "cpu_seconds and wall_seconds must be under a century"};
  if (limits.address_space_bytes.value > bytes.bytes() || limits.file_size_bytes.value > bytes.bytes())
    return launch_refusal{launch_stage::limits, "address_space_bytes and file_size_bytes must be under 2^" +
                                        std::to_string(bytes.power_of_two)};
  if (limits.process_count.value > max_processes)
    return launch_refusal{launch_stage::limits, "process_count must be at most " + std::to_string(max_processes)};
  return std::nullopt;
}

}  // namespace psych::protocol
