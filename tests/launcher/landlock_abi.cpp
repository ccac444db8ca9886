// The Landlock ABI the launcher applies here, for the cases that compare it with the report. In a
// file of its own: psych::launcher (the launcher's namespace) and psych::testing::launcher (the
// test host's class) cannot both be in view where the cases use `launcher`.
#include "landlock.hpp"
#include "test_host.hpp"

namespace psych::testing {

int launcher_landlock_abi() { return psych::launcher::landlock_abi_used(); }

}  // namespace psych::testing
