#include "seccomp.hpp"

#include <cerrno>

#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "seccomp_programs.hpp"

namespace psych::launcher {

seccomp_filter filter_for(network_access network) noexcept {
  return network == network_access::none ? seccomp_filter{compiled::without_network}
                                         : seccomp_filter{compiled::with_network};
}

setup_result<void> install_filter(seccomp_filter filter) {
  const sock_fprog program{.len = static_cast<unsigned short>(filter.size()),
                           .filter = const_cast<sock_filter*>(filter.data())};
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) != 0)
    return fail(system_failure(launch_stage::seccomp, "seccomp", errno, "SECCOMP_SET_MODE_FILTER, 0"));
  return success();
}

}  // namespace psych::launcher
