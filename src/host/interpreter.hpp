#pragma once
// Choosing the interpreter the child runs: a real binary, never a shim.
// Shims (pyenv's, asdf's) are shell scripts that re-exec through the user's
// home directory, which a sandboxed child cannot read.
#include <optional>
#include <string>
#include <vector>

#include "psych/result.hpp"

namespace psych::host {

struct interpreter_choice {
  std::string path;                ///< resolved, absolute, an ELF executable
  std::vector<std::string> notes;  ///< e.g. which shims were skipped
};

result<interpreter_choice> resolve_interpreter(const std::optional<std::string>& requested);

}  // namespace psych::host
