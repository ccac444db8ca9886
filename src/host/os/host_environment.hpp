#pragma once
// One variable of this process's environment, as UTF-8. On Windows it is read as UTF-16 from the
// process's environment block, which SetEnvironmentVariableW changes and children inherit: getenv
// reads the C runtime's copy, made at startup, and spells it in the ANSI code page.
#include <optional>
#include <string>

namespace psych::host {

/// The variable's value, or nullopt when it is not set (on Windows, whatever the name's case).
std::optional<std::string> environment_value(const std::string& name);

}  // namespace psych::host
