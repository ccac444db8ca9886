#pragma once
// Applying the seatbelt profile (seatbelt_profile.hpp) to the child, between the identity drop
// and the exec: it holds for the interpreter and everything it starts, and nothing in it can lift
// it.
#include <string>

#include "setup_error.hpp"

namespace psych::launcher {

/// sandbox_init() with the profile's text. The error names sandbox_init and carries the
/// compiler's message (a profile that does not parse, an operation this macOS does not know).
setup_result<void> enter_seatbelt(const std::string& profile);

}  // namespace psych::launcher
