// The bootstrap in a sealed memfd (Linux).
#include "bootstrap_fd.hpp"

#include "platform/posix/retry.hpp"

#include <cerrno>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace psych::launcher {

setup_result<bootstrap_fd> seal_bootstrap(std::span<const unsigned char> blob) {
  bootstrap_fd memfd{::memfd_create("psych-bootstrap", MFD_CLOEXEC | MFD_ALLOW_SEALING)};
  if (memfd.get() < 0)
    return fail(system_failure(launch_stage::bootstrap, "memfd_create", errno, "psych-bootstrap, MFD_CLOEXEC | MFD_ALLOW_SEALING"));
  // pwrite, not write: the child shares this file description, and must find its offset at 0.
  if (const auto written = posix::pwrite_all(memfd.get(), blob.data(), blob.size(), 0); written.done < blob.size())
    return fail(system_failure(launch_stage::bootstrap, "pwrite", written.error != 0 ? written.error : EIO, "psych-bootstrap"));
  if (::fcntl(memfd.get(), F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) != 0)
    return fail(system_failure(launch_stage::bootstrap, "fcntl", errno, "F_ADD_SEALS, SEAL|SHRINK|GROW|WRITE"));
  return memfd;
}

}  // namespace psych::launcher
