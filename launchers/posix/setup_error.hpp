#pragma once
// How a POSIX launcher's system call fails: launchers/setup_result.hpp's error frame with errno as
// error_number and the call that returned it as syscall.
#include <string_view>

#include "launchers/setup_result.hpp"

namespace psych::launcher {

using launch_setup::fail;
using launch_setup::from_error;
using launch_setup::launch_stage;
using launch_setup::refusal;
using launch_setup::setup_error;
using launch_setup::setup_result;
using launch_setup::success;

/// `call` failed with `error_number` while doing `what` (for example "RLIMIT_AS, 536870912").
/// The message reads "setrlimit(RLIMIT_AS, 536870912): Operation not permitted".
setup_error system_failure(launch_stage stage, std::string_view call, int error_number,
                           std::string_view what = {});

}  // namespace psych::launcher
