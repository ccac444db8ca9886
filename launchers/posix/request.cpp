#include "request.hpp"

#include <utility>
#include <variant>

#include <unistd.h>

#include "fds.hpp"
#include "validate.hpp"

namespace psych::launcher {

setup_result<accepted_request> accept_request(control_channel& control, isolation_level reachable,
                                              bool network_of_its_own) {
  PSYCH_TRY(check_inherited_fds());
  PSYCH_TRY(auto line, control.read_line());
  if (!line) return fail(refusal(launch_stage::protocol, "control closed before a launch frame arrived"));
  auto frame = protocol::decode_frame<protocol::launch_frame, protocol::cancel_frame>(*line);
  if (!frame) return fail(from_error(launch_stage::protocol, frame.error()));
  if (!std::holds_alternative<protocol::launch_frame>(frame.value()))
    return fail(refusal(launch_stage::protocol, "the first frame on control must be launch"));
  auto launch = std::get<protocol::launch_frame>(std::move(frame).value());
  PSYCH_TRY(validate_launch(launch, reachable, network_of_its_own));
  // Unprivileged, an ISOLATED sandbox maps the worker's own uid into its user namespace, which is
  // the boundary there; the same uid without that boundary needs the deployment's consent.
  const bool own_uid_is_fine = launch.isolation == isolation_level::isolated && ::geteuid() != 0;
  PSYCH_TRY(auto identity, plan_identity(launch.run_as, launch.allow_same_uid || own_uid_is_fine));
  PSYCH_TRY(auto environment, build_environment(launch.environment));
  return accepted_request{std::move(launch), identity, std::move(environment)};
}

}  // namespace psych::launcher
