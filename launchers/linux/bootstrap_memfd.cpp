// The bootstrap in a sealed memfd (Linux).
#include "bootstrap_fd.hpp"

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
  std::size_t done = 0;
  while (done < blob.size()) {
    const ssize_t n = ::pwrite(memfd.get(), blob.data() + done, blob.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(system_failure(launch_stage::bootstrap, "pwrite", n < 0 ? errno : EIO, "psych-bootstrap"));
    done += static_cast<std::size_t>(n);
  }
  if (::fcntl(memfd.get(), F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) != 0)
    return fail(system_failure(launch_stage::bootstrap, "fcntl", errno, "F_ADD_SEALS, SEAL|SHRINK|GROW|WRITE"));
  return memfd;
}

}  // namespace psych::launcher
