#include "os/host_environment.hpp"

#ifdef _WIN32
#include <windows.h>

#include "platform/windows/text.hpp"  // widen, narrow
#else
#include <cstdlib>
#endif

namespace psych::host {

#ifdef _WIN32
std::optional<std::string> environment_value(const std::string& name) {
  const auto wide_name = windows::widen(name);
  std::wstring value(256, L'\0');
  for (;;) {
    ::SetLastError(ERROR_SUCCESS);
    const DWORD needed = ::GetEnvironmentVariableW(wide_name.c_str(), value.data(), static_cast<DWORD>(value.size()));
    if (needed == 0 && ::GetLastError() == ERROR_ENVVAR_NOT_FOUND) return std::nullopt;
    if (needed < value.size()) {
      value.resize(needed);
      return windows::narrow(value);
    }
    value.resize(needed);  // too small: `needed` counts the terminating NUL
  }
}
#else
std::optional<std::string> environment_value(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (!value) return std::nullopt;
  return std::string(value);
}
#endif

}  // namespace psych::host
