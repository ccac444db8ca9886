#include "exec_status.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>  // PIPE_BUF
#include <cstring>
#include <string_view>

#include <unistd.h>

#include "platform/posix/retry.hpp"

namespace psych::launcher {

namespace {

struct status_record {
  int error_number = 0;
  char stage[32] = {};
  char syscall[32] = {};
  char message[440] = {};
};
static_assert(sizeof(status_record) < PIPE_BUF);

template <std::size_t N>
void copy_text(char (&to)[N], std::string_view from) {
  const auto n = std::min(from.size(), N - 1);
  std::memcpy(to, from.data(), n);
  to[n] = '\0';
}

}  // namespace

void report_setup_failure(int status_fd, const setup_error& error) {
  status_record record;
  record.error_number = static_cast<int>(error.error_number);
  copy_text(record.stage, error.stage.spelling());
  copy_text(record.syscall, error.syscall);
  copy_text(record.message, error.message);
  [[maybe_unused]] const auto ignored = ::write(status_fd, &record, sizeof record);
  ::_exit(127);
}

setup_result<std::optional<setup_error>> read_setup_status(int fd) {
  status_record record;
  // Until the record is whole or every writer has closed the pipe.
  const auto read = posix::read_all(fd, &record, sizeof record);
  if (read.error != 0) return fail(system_failure(launch_stage::exec, "read", read.error, "exec-status pipe"));
  const std::size_t got = read.done;
  if (got == 0) return success(std::optional<setup_error>{});
  if (got != sizeof record) return fail(refusal(launch_stage::exec, "the child's setup report was cut short"));
  const auto stage = open_enum<launch_stage>::from_spelling(record.stage);
  return success(std::optional<setup_error>{setup_error{stage, record.syscall, record.error_number, record.message}});
}

}  // namespace psych::launcher
