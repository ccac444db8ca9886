#include "setup_error.hpp"

#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "platform/windows/text.hpp"

namespace psych::windows {

setup_error system_failure(launch_stage stage, std::string_view call, DWORD error, std::string_view what) {
  return setup_error{stage, std::string(call), static_cast<std::int64_t>(error),
                     fmt::format("{}({}): {}", call, what, error_text(error))};
}

setup_error last_error(launch_stage stage, std::string_view call, std::string_view what) {
  return system_failure(stage, call, ::GetLastError(), what);
}

}  // namespace psych::windows
