#pragma once
// The first frame on control, checked in full and turned into what the child will get before
// anything is created: a bad request costs nothing and ends with one `error` frame (exit code 2).
#include "channel.hpp"
#include "environment.hpp"
#include "setup_error.hpp"
#include "identity.hpp"
#include "psych/protocol/frames.hpp"

namespace psych::launcher {

/// The request, checked and turned into what the child will get. Nothing is created yet.
struct accepted_request {
  protocol::launch_frame launch;
  identity_plan identity;
  string_vector environment;
};

/// Checks the inherited fds, reads the `launch` frame and validates it against `reachable`, the
/// highest level this launcher can provide (validate.hpp), then plans the identity and builds the
/// environment.
setup_result<accepted_request> accept_request(control_channel& control, isolation_level reachable,
                                              bool network_of_its_own = false);

}  // namespace psych::launcher
