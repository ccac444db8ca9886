#pragma once
// How a child tells the launcher that its setup failed before exec: one fixed-size record on an
// O_CLOEXEC pipe. EOF with nothing in it means the exec happened. Shared by the PROCESS spawn
// and the ISOLATED init and interpreter, which report on the same pipe.
#include <optional>

#include "setup_error.hpp"

namespace psych::launcher {

/// Writes `error` as one record (atomic: far below PIPE_BUF) and ends the process with 127.
[[noreturn]] void report_setup_failure(int status_fd, const setup_error& error);

/// Reads the pipe to EOF. nullopt: every writer closed it without a report.
setup_result<std::optional<setup_error>> read_setup_status(int fd);

}  // namespace psych::launcher
