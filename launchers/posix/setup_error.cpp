#include "setup_error.hpp"

#include <cstring>
#include <string>

#include <fmt/format.h>

namespace psych::launcher {

setup_error system_failure(launch_stage stage, std::string_view call, int error_number,
                           std::string_view what) {
  return setup_error{stage, std::string(call), error_number,
                     fmt::format("{}({}): {}", call, what, std::strerror(error_number))};
}

}  // namespace psych::launcher
