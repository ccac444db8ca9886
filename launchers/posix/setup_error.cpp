#include "setup_error.hpp"

#include <cstring>
#include <string>

#include <fmt/format.h>

namespace psych::launcher {

setup_error system_failure(std::string_view stage, std::string_view call, int error_number,
                           std::string_view what) {
  return setup_error{std::string(stage), std::string(call), error_number,
                     fmt::format("{}({}): {}", call, what, std::strerror(error_number))};
}

}  // namespace psych::launcher
