// The bootstrap in an unlinked file (macOS has no memfd): written through one descriptor, then
// opened again read-only and unlinked, and only the read-only one is kept. No name is left to open
// it by, and nothing holds a descriptor that could write it, so what the child reads is what the
// launcher wrote.
#include "bootstrap_fd.hpp"

#include "platform/posix/retry.hpp"

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
  if (const auto written = posix::pwrite_all(writer.get(), blob.data(), blob.size(), 0); written.done < blob.size())
    return fail(system_failure(launch_stage::bootstrap, "pwrite", written.error != 0 ? written.error : EIO, path));
  return reader;
}

}  // namespace psych::launcher
