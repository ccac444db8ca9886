#include "kernel_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

namespace psych::launcher {

setup_result<void> write_kernel_file(launch_stage stage, const std::string& path, std::string_view value) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return fail(system_failure(stage, "open", errno, path));
  const ssize_t written = ::write(fd, value.data(), value.size());
  const int error = written < 0 ? errno : EIO;
  ::close(fd);
  if (written != static_cast<ssize_t>(value.size()))
    return fail(system_failure(stage, "write", error, fmt::format("{}, {:?}", path, value)));
  return success();
}

}  // namespace psych::launcher
