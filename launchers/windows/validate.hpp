#pragma once
// The launch frame as input, checked in full before anything is created: what the Windows launcher
// offers (isolation=process, the worker's own account, no prepared launches) and values that fit
// the Job Object's fields.
#include "setup_error.hpp"
#include "psych/protocol/frames.hpp"

namespace psych::windows {

setup_result<void> validate_launch(const protocol::launch_frame& launch);

}  // namespace psych::windows
