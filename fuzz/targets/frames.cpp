// The launcher contract's frames (psych/protocol/frames.hpp), every type on both the control
// stream and the program's channel: a peer may send any line, so each decoder sees them all.
#include "frame_target.hpp"
#include "psych/protocol/frames.hpp"

using namespace psych::protocol;

PSYCH_FUZZ_FRAMES(launch_frame, cancel_frame, started_frame, launch_error_frame, exit_frame, hello_frame,
                  call_frame, cancel_call_frame, done_frame, run_frame, result_frame, abort_frame, narrow_frame,
                  narrowed_frame, lower_limits_frame, lowered_frame)
