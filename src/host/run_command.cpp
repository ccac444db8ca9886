#include "run_command.hpp"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>

#include "child_process.hpp"
#include "posix.hpp"

namespace psych::host {

namespace {
constexpr std::size_t output_bytes_max = std::size_t{1} << 20;
}

result<command_output> run_command(const std::vector<std::string>& argv, const std::vector<std::string>& environment,
                                   std::chrono::milliseconds limit) {
  PSYCH_TRY(auto out, cloexec_pipe());
  PSYCH_TRY(auto err, cloexec_pipe());
  auto child = child_process::spawn({.argv = argv,
                                     .environment = environment,
                                     .descriptors = {-1, out.second.get(), err.second.get()}});
  if (!child) return failure(error_kind::system_call_failed, child.error().message());
  out.second.reset();
  err.second.reset();

  command_output result;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::array<pollfd, 2> fds{pollfd{out.first.get(), POLLIN, 0}, pollfd{err.first.get(), POLLIN, 0}};
  std::array<std::string*, 2> into{&result.stdout_text, &result.stderr_text};
  int open = 2;
  bool timed_out = false;
  while (open > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    if (::poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[16384];
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n <= 0) {
        fds[i].fd = -1;  // end of file (or an error): poll ignores a negative fd
        --open;
        continue;
      }
      auto& text = *into[i];
      text.append(buffer, std::min(static_cast<std::size_t>(n), output_bytes_max - std::min(text.size(), output_bytes_max)));
    }
  }
  // Both streams ended; what is left of the limit is how long it may take to exit.
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  if (timed_out || !child.value().wait_exit(std::max(left, std::chrono::milliseconds(0))))
    child.value().signal_group(ending::kill);
  const auto status = child.value().reap();
  result.exit_code = timed_out ? -1 : status.code;
  return result;
}

}  // namespace psych::host
