#pragma once
// The child's environment, built from nothing: exactly launch.environment, as the UTF-16 block
// CreateProcessW takes. Nothing of the launcher's own environment (the host's port and secret
// included) reaches it.
#include <map>
#include <string>

#include "psych/result.hpp"

namespace psych::windows {

/// "NAME=value\0" for each variable, sorted by name without regard to case (Windows' order for an
/// environment block), ending with one more "\0". A name that is empty, holds '=' or NUL, or
/// repeats another but for case (Path and PATH are one variable on Windows) is refused, as is a
/// NUL in a value.
result<std::wstring> build_environment_block(const std::map<std::string, std::string>& variables);

/// Whether two names are one variable on Windows: equal as upper-case UTF-16, as the block's
/// builder compares them.
bool same_variable_name(const std::string& a, const std::string& b);

}  // namespace psych::windows
