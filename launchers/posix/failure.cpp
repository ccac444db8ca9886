#include "failure.hpp"

#include <cstring>

#include <fmt/format.h>

namespace psych::launcher {

setup_error system_failure(std::string_view stage, std::string_view call, int error_number,
                           std::string_view what) {
  return setup_error{std::string(stage), std::string(call), error_number,
                     fmt::format("{}({}): {}", call, what, std::strerror(error_number))};
}

setup_error refusal(std::string_view stage, std::string message) {
  return setup_error{std::string(stage), "", 0, std::move(message)};
}

setup_error from_error(std::string_view stage, const psych::error& error) {
  return setup_error{std::string(stage), "", 0, error.message()};
}

}  // namespace psych::launcher
