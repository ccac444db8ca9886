#include "launch_steps.hpp"

namespace psych::launcher {

setup_result<accepted_launch> accept_launch(control_channel& control, isolation_level reachable,
                                            signal_opener open_signals, int& exit_status, bool network_of_its_own) {
  auto request = accept_request(control, reachable, network_of_its_own);
  if (!request) {
    (void)control.write(request.error());
    exit_status = exit_refused;
    return fail(request.error());
  }
  auto signals = open_signals();
  if (!signals) {
    (void)control.write(signals.error());
    exit_status = exit_setup_failed;
    return fail(signals.error());
  }
  return accepted_launch{std::move(request).value(), signals.value()};
}

int report_failed_start(control_channel& control, const setup_error& error, const signal_source& signals,
                        descendant_finder& tree) {
  child_exit none;
  kill_tree(0, none, signals, tree);
  (void)control.write(error);
  return exit_setup_failed;
}

bool report_started(control_channel& control, const launched& started, const signal_source& signals,
                    descendant_finder& tree) {
  if (control.write(started.started)) return true;
  child_exit ended;  // the host is gone: end what was started for it
  kill_tree(started.child.pid, ended, signals, tree);
  return false;
}

int report_exit(control_channel& control, const supervision& outcome) {
  if (outcome.host_gone) return exit_setup_failed;
  return control.write(outcome.exit) ? exit_reported : exit_setup_failed;
}

}  // namespace psych::launcher
