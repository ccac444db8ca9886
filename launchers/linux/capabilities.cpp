#include "capabilities.hpp"

#include <cerrno>

#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace psych::launcher {

setup_result<void> drop_all_capabilities() {
  constexpr unsigned long locked_bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                                        SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                                        SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
  if (::prctl(PR_SET_SECUREBITS, locked_bits, 0, 0, 0) != 0)
    return fail(system_failure(launch_stage::capabilities, "prctl", errno, "PR_SET_SECUREBITS"));
  // Every capability the kernel knows, however new: PR_CAPBSET_READ fails past the last one.
  for (unsigned long cap = 0; ::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; ++cap)
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0)
      return fail(system_failure(launch_stage::capabilities, "prctl", errno, "PR_CAPBSET_DROP"));
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0)
    return fail(system_failure(launch_stage::capabilities, "prctl", errno, "PR_CAP_AMBIENT_CLEAR_ALL"));
  __user_cap_header_struct header{.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = {};
  if (::syscall(SYS_capset, &header, none) != 0)
    return fail(system_failure(launch_stage::capabilities, "capset", errno, "all sets empty"));
  return success();
}

}  // namespace psych::launcher
