#pragma once
// The step of a launch that failed: the `stage` of the contract's `error` frame (frames.hpp). The
// host names the step in `launch_failed`'s message and never decides an outcome by it (the local
// backend reads it only to say which host setting refused a namespace step), so a launcher built
// apart from its host may name a step this host does not have: the frame carries an open_enum.
#include "psych/names.hpp"

namespace psych::protocol {

enum class launch_stage {
  /// The control or channel frames: one the launcher could not read, or one out of sequence.
  protocol,
  /// The launch frame's values (version, paths, token, probe ports) or a prepared launch's claim.
  launch,
  /// The requested isolation is beyond this launcher, or a combination it does not offer.
  isolation,
  /// The launch's limits are invalid or beyond the launcher's ceilings.
  limits,
  /// A `narrow` frame's limits are invalid or wider than the launch's, or applying them failed.
  narrow,
  /// Taking the program's uid and gid, or the identity the launcher runs as.
  identity,
  /// The program's environment: its variables and their encoding.
  environment,
  /// The workspace: its ownership, or entering it.
  workspace,
  /// The descriptors the program inherits: opening, moving and closing them.
  fds,
  /// The launcher's signal handling (signalfd, a self-pipe, masks and dispositions).
  signals,
  /// Becoming the subreaper of the program's process tree.
  tree,
  /// Reading the process table, to find what the program left.
  proc,
  /// Handing the bootstrap to the interpreter (a memfd or a private file).
  bootstrap,
  /// ISOLATED: making the namespaces and writing their uid and gid maps.
  namespaces,
  /// ISOLATED: the sandbox's root: its mounts, pivot_root and what it links in.
  filesystem,
  /// ISOLATED: dropping the capabilities the namespaces gave.
  capabilities,
  /// ISOLATED: the execution's cgroup: making it, its limits, joining and removing it.
  cgroup,
  /// Building or installing the seccomp filter; the launch fails closed without it.
  seccomp,
  /// Setting the program's resource limits.
  rlimits,
  /// Putting the program in a session of its own, and its parent-death signal.
  session,
  /// Setting NoNewPrivs, which the seccomp filter and Landlock need.
  no_new_privs,
  /// Preparing or applying the Landlock ruleset.
  landlock,
  /// macOS: building or applying the Seatbelt profile.
  seatbelt,
  /// Windows: the job object that holds the program's processes and limits.
  job,
  /// Windows: the handles the program inherits (pipes, files, duplicates).
  handles,
  /// Windows: starting the program's process.
  spawn,
  /// Windows: the program's channel to the host.
  channel,
  /// Starting the interpreter: fork, exec, and the child's report of a step that failed.
  exec,
  /// Reading or writing the control connection to the host.
  control,
  /// Windows: waiting for the program, a cancel or the clock.
  supervise,
  /// Inside a container: taking the channel and the launch from the starter.
  container,
  /// network=allowlist: the egress proxy's listeners inside the sandbox's network namespace, and
  /// handing them to the host.
  egress,
};

}  // namespace psych::protocol

namespace psych {
PSYCH_ENUM_NAMES(protocol::launch_stage, "protocol", "launch", "isolation", "limits", "narrow", "identity",
                 "environment", "workspace", "fds", "signals", "tree", "proc", "bootstrap", "namespaces",
                 "filesystem", "capabilities", "cgroup", "seccomp", "rlimits", "session", "no_new_privs", "landlock",
                 "seatbelt", "job", "handles", "spawn", "channel", "exec", "control", "supervise", "container",
                 "egress");
}
