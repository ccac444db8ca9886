#pragma once
// Choosing the interpreter the child runs: a real binary the child's identity can reach,
// never a shim. Shims (pyenv's, asdf's) are shell scripts that re-exec through the user's
// home directory; an interpreter installed under a home directory (pyenv, conda, a venv's
// copy) sits behind a 0700 directory the sandbox's uid cannot search. Either fails inside
// the sandbox with a bare EACCES, so both are found here, before anything runs.
#include <optional>
#include <string>
#include <vector>

#include "os/path_access.hpp"
#include "psych/result.hpp"

namespace psych::host {

struct interpreter_choice {
  std::string path;                ///< resolved, absolute, an ELF executable
  std::vector<std::string> notes;  ///< what automatic choice skipped, and why
};

/// `requested`, or the first usable python3 on PATH, then /usr/bin and /usr/local/bin.
/// `child`: the identity the interpreter will run as; nullopt: do not check reachability.
result<interpreter_choice> resolve_interpreter(const std::optional<std::string>& requested,
                                               const std::optional<accessor>& child = std::nullopt);

/// Why `child` cannot run the interpreter at `binary` (resolved), in a sentence that names
/// the directory, its mode and what to do; nullopt: it can.
std::optional<std::string> unreachable_interpreter(const std::string& binary, const accessor& child);

}  // namespace psych::host
