#pragma once
// Inside the user namespace the interpreter is uid 0, which would otherwise hold every
// capability of that namespace (mount, network administration, ...) and regain them on exec.
// These calls end that before exec: no capability in any set, none that exec could grant.
#include "setup_error.hpp"

namespace psych::launcher {

/// In the interpreter's child, before NoNewPrivs: locks the securebits that stop uid 0 from
/// getting capabilities on exec (NOROOT, NO_SETUID_FIXUP, no ambient raise), empties the bounding
/// and ambient sets, then the effective, permitted and inheritable sets. No allocation.
setup_result<void> drop_all_capabilities();

}  // namespace psych::launcher
