#pragma once
// From `started` to `exit`: waits for the child, a control frame or the wall clock, whichever
// comes first; then ends the job's tree and verifies it empty from the job's own accounting.
#include "channel.hpp"
#include "job.hpp"
#include "psych/protocol/frames.hpp"
#include "spawn.hpp"

namespace psych::windows {

struct supervision_outcome {
  protocol::exit_frame exit;
  /// Control reached end of file: the host is gone. The tree was ended; no `exit` is written.
  bool host_gone = false;
};

setup_result<supervision_outcome> supervise(control_channel& control, const started_child& child,
                                            const execution_job& job, double wall_seconds);

}  // namespace psych::windows
