#pragma once
// The seccomp filter: the last thing installed before exec. Even at the
// PROCESS level it closes the calls that turn "a process with another uid"
// into "a process that can reach the kernel's attack surface or another
// process's memory": tracing, namespaces, mounts, keyrings, BPF, io_uring,
// module loading, terminal injection, and socket() of every family (with a
// network grant, every family but AF_INET/AF_INET6; socketpair(AF_UNIX)
// always stays). The rules are in seccomp_rules.cpp; the launcher carries
// them compiled to BPF at build time.
#include <span>

#include <linux/filter.h>

#include "setup_error.hpp"
#include "psych/isolation.hpp"

namespace psych::launcher {

/// One launch's filter: a BPF program that lives as long as the launcher.
using seccomp_filter = std::span<const sock_filter>;

/// The precompiled program for this network grant.
seccomp_filter filter_for(network_access network) noexcept;

/// In the child, after PR_SET_NO_NEW_PRIVS and immediately before exec: seccomp(2) with no flags,
/// which is what seccomp_load does with libseccomp's default attributes.
setup_result<void> install_filter(seccomp_filter filter);

}  // namespace psych::launcher
