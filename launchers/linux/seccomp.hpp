#pragma once
// The seccomp filter: the last thing installed before exec. Even at the
// PROCESS level it closes the calls that turn "a process with another uid"
// into "a process that can reach the kernel's attack surface or another
// process's memory": tracing, namespaces, mounts, keyrings, BPF, io_uring,
// module loading, terminal injection, and (without a network grant) every
// socket family but AF_UNIX.
#include <memory>

#include "failure.hpp"
#include "psych/isolation.hpp"

namespace psych::launcher {

/// A compiled-in-memory libseccomp context, built in the launcher before the fork so that a
/// rule libseccomp rejects is reported before any child exists.
class seccomp_filter {
 public:
  struct context_deleter {
    void operator()(void* context) const noexcept;
  };
  explicit seccomp_filter(void* context) : context_(context) {}
  [[nodiscard]] void* context() const noexcept { return context_.get(); }

 private:
  std::unique_ptr<void, context_deleter> context_;
};

/// The filter for one launch: the deny list always; the socket rule unless network is unrestricted.
setup_result<seccomp_filter> build_filter(network_access network);

/// In the child, after PR_SET_NO_NEW_PRIVS and immediately before exec.
setup_result<void> install_filter(const seccomp_filter& filter);

}  // namespace psych::launcher
