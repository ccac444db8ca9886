#pragma once
// The seatbelt profile (SBPL, the Scheme dialect of sandbox_init) the macOS launcher confines the
// interpreter with: everything the interpreter's own process does is allowed by default, reads
// too, except under the subtrees that hold the worker's secrets; writes only to the workspace, the
// temp dir and a few devices; network only with a grant. A pure function of its terms, so it is
// compiled and tested on every platform (tests/launcher/seatbelt_profile_tests.cpp).
//
// Seatbelt matches canonical paths (/tmp is /private/tmp there): the caller resolves every path
// before it asks for a profile.
#include <string>
#include <string_view>
#include <vector>

#include "setup_error.hpp"

namespace psych::launcher {

struct seatbelt_terms {
  std::string workspace;  ///< read, write, create, remove
  std::string tmp_dir;    ///< read, write, create, remove
  /// Subtrees nothing may read (or list, or stat): the worker's home, other accounts' homes, the
  /// other executions' directories, the canary's directory.
  std::vector<std::string> read_denied;
  /// Subtrees readable again inside a denied one: the interpreter's installation, when it lives
  /// under a home directory.
  std::vector<std::string> read_reopened;
  bool network = false;  ///< the launch's network grant
};

/// `path` as an SBPL string literal, quotes included: `"` and `\` are escaped. A path that is not
/// absolute, or holds a control character (a newline, a NUL), is refused at stage "seatbelt"
/// rather than escaped: such a name is never one the host made.
setup_result<std::string> sbpl_string(std::string_view path);

/// The whole profile. Fails only when a path is refused by sbpl_string().
setup_result<std::string> seatbelt_profile(const seatbelt_terms& terms);

}  // namespace psych::launcher
