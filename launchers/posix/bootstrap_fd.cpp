#include "bootstrap_fd.hpp"

#include <unistd.h>

namespace psych::launcher {

bootstrap_fd::~bootstrap_fd() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace psych::launcher
