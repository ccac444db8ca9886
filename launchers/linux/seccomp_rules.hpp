#pragma once
// The seccomp policy as rules, compiled to BPF by libseccomp. This runs at build time, in
// psych-compile-seccomp, never in the launcher: every execution would otherwise pay for
// libseccomp's compiler (~0.2-0.4 ms) to produce the same few dozen instructions.
#include <vector>

#include <linux/filter.h>

#include "setup_error.hpp"
#include "psych/isolation.hpp"

namespace psych::launcher {

/// The deny list always; socket() refused for every family without a network grant, and for
/// every family but AF_INET/AF_INET6 with one; socketpair() for AF_UNIX only. Only the build
/// machine's native architecture is admitted; any other ABI kills the process.
setup_result<std::vector<sock_filter>> compile_rules(network_access network);

}  // namespace psych::launcher
