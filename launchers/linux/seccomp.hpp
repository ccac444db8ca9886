#pragma once
// The seccomp filter: the last thing installed before exec. Even at the
// PROCESS level it closes the calls that turn "a process with another uid"
// into "a process that can reach the kernel's attack surface or another
// process's memory": tracing, namespaces, mounts, keyrings, BPF, io_uring,
// module loading, terminal injection, and (without a network grant) every
// socket family but AF_UNIX.
#include <vector>

#include <linux/filter.h>

#include "failure.hpp"
#include "psych/isolation.hpp"

namespace psych::launcher {

/// The filter for one launch as a BPF program, compiled by libseccomp in the launcher before
/// the fork: a rule libseccomp rejects is reported before any child exists, and the child only
/// makes the one system call that installs it. (Generating the program in the child, as
/// seccomp_load does, cost ~0.2 ms of every start.)
class seccomp_filter {
 public:
  explicit seccomp_filter(std::vector<sock_filter> program) : program_(std::move(program)) {}
  [[nodiscard]] const std::vector<sock_filter>& program() const noexcept { return program_; }

 private:
  std::vector<sock_filter> program_;
};

/// The filter for one launch: the deny list always; the socket rule unless network is unrestricted.
setup_result<seccomp_filter> build_filter(network_access network);

/// In the child, after PR_SET_NO_NEW_PRIVS and immediately before exec: seccomp(2) with no flags,
/// which is what seccomp_load does with libseccomp's default attributes.
setup_result<void> install_filter(const seccomp_filter& filter);

}  // namespace psych::launcher
