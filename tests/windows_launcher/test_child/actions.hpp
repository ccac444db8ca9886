#pragma once
// The test child's program (observations.hpp lists the actions) and what it observed running it.
#include <optional>
#include <string>

#include "observations.hpp"
#include "psych/protocol/frames.hpp"

namespace psych::windows::test_child {

struct program_outcome {
  observations seen;
  std::optional<protocol::program_error> error;  ///< an action failed on a limit
};

/// `self` is the test child's own path, for `spawn`; `workspace` the directory relative paths are in.
program_outcome run_program(const std::string& program, const std::wstring& self, const std::string& workspace);

}  // namespace psych::windows::test_child
