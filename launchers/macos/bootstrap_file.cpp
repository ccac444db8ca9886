// The bootstrap in an unlinked file (macOS has no memfd): written through one descriptor, then
// opened again read-only and unlinked, and only the read-only one is kept. No name is left to open
// it by, and nothing holds a descriptor that could write it, so what the child reads is what the
// launcher wrote.
#include "bootstrap_fd.hpp"

#include <cerrno>
#include <cstdlib>
#include <string>

#include <fcntl.h>
#include <unistd.h>

namespace psych::launcher {

setup_result<bootstrap_fd> seal_bootstrap(std::span<const unsigned char> blob) {
  // Under /tmp, 0600, the launcher's own: only the launcher's uid could open it in the moment
  // before it is unlinked, and that uid is the worker's (or root).
  std::string path = "/tmp/psych-bootstrap-XXXXXX";
  bootstrap_fd writer{::mkstemp(path.data())};
  if (writer.get() < 0) return fail(system_failure(launch_stage::bootstrap, "mkstemp", errno, path));
  bootstrap_fd reader{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)};
  const int open_error = errno;
  ::unlink(path.c_str());
  if (reader.get() < 0) return fail(system_failure(launch_stage::bootstrap, "open", open_error, path));
  std::size_t done = 0;
  while (done < blob.size()) {
    const ssize_t n = ::pwrite(writer.get(), blob.data() + done, blob.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(system_failure(launch_stage::bootstrap, "pwrite", n < 0 ? errno : EIO, path));
    done += static_cast<std::size_t>(n);
  }
  return reader;
}

}  // namespace psych::launcher
